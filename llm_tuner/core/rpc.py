"""llama.cpp's RPC devices as data: worker endpoints, device order, and RPC errors in plain words.

A worker is a `ggml-rpc-server` on some machine (`host:port`); `llama-server --rpc A,B` registers its
devices as `RPC0`, `RPC1`, ... (numbered over all servers, in `--rpc` order, after the local devices in
`--list-devices`). Without `-dev`, llama.cpp puts the RPC devices FIRST in a model's device list
(src/llama.cpp "add RPC servers at the front of the list to minimize network transfers"), so `-ts` and the
layer split follow that order, not the printed one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from llm_tuner.core import flags

if TYPE_CHECKING:
    from llm_tuner.core.cmdline.help import FlagCatalog

# Upstream's words (tools/rpc/rpc-server.cpp prints them when bound to anything but 127.0.0.1).
INSECURE_WARNING = ("ggml-rpc-server is bound to {host}, not loopback: anyone who can reach {host}:{port} "
                    "can run code in it and read or change what it holds. Upstream: \"Never expose the RPC "
                    "server to an open network! This is an experimental feature and is not secure!\" Use it "
                    "only on a network you trust (a private LAN, a VPN or an SSH tunnel).")

_ENDPOINT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def parse_endpoint(text: str) -> tuple[str, int]:
    """`host:port` -> (host, port); ValueError in plain words when it is not one."""
    text = text.strip()
    m = _ENDPOINT.match(text)
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"{text!r} is not a worker address: write host:port, e.g. 192.168.1.20:50052")
    return m.group(1).strip("[]"), int(m.group(2))


def split_endpoints(value: str | Sequence[str]) -> list[str]:
    """`--rpc` value(s) -> endpoints (comma-separated, as llama.cpp splits them), each checked."""
    items = value.split(",") if isinstance(value, str) else [x for v in value for x in v.split(",")]
    out = [x.strip() for x in items if x.strip()]
    for x in out:
        parse_endpoint(x)
    return out


def is_loopback(host: str) -> bool:
    """127.0.0.1, ::1 and localhost: the only binds upstream does not warn about."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_warning(host: str, port: int) -> str | None:
    """The insecurity warning for a worker bound to anything but loopback; None on loopback."""
    return None if is_loopback(host) else INSECURE_WARNING.format(host=host, port=port)


def is_rpc_device(name: str) -> bool:
    return re.fullmatch(r"RPC\d+", name) is not None


T = TypeVar("T")


def default_device_order(devices: Iterable[T]) -> list[T]:
    """The devices a model uses without `-dev`, in llama.cpp's order: RPC devices first, then the others.

    `devices` are names or objects with `.name` (core.devices.LlamaDevice, core.memory.PlanDevice), in
    `--list-devices` order.
    """
    items = list(devices)

    def name(d: Any) -> str:  # a name, or an object with .name
        return d if isinstance(d, str) else str(d.name)

    return [d for d in items if is_rpc_device(name(d))] + [d for d in items if not is_rpc_device(name(d))]


def device_endpoint(device: object) -> str | None:
    """An RPC device's worker (`host:port`, its `--list-devices` description); None for a local device."""
    desc = str(getattr(device, "description", "") or "").strip()
    if not is_rpc_device(str(getattr(device, "name", ""))):
        return None
    try:
        parse_endpoint(desc)
    except ValueError:
        return None
    return desc


NO_RPC = ("this llama-server was built without RPC: use a build configured with -DGGML_RPC=ON (the built-in "
          "one is), or choose another llama-server in Settings")


def rpc_support_error(catalog: FlagCatalog | None) -> str | None:
    """NO_RPC when a binary's flag catalog (its --help, core.cmdline.FlagCatalog) lacks `--rpc`: builds
    without the RPC backend (older llama.cpp, forks) do not list it; None when it is there or unknown."""
    if catalog is None or catalog.lookup(flags.spelling("rpc")) is not None:
        return None
    return f"no RPC: {NO_RPC}"


# llama.cpp's messages (ggml/src/ggml-rpc/ggml-rpc.cpp, common/arg.cpp) -> (kind, what it means, what to do)
_ERRORS = (
    (re.compile(r"Failed to connect to (\S+)"), "connection refused",
     "nothing answers at {0}: is ggml-rpc-server running there, on that port, and does a firewall let it "
     "through?"),
    (re.compile(r"RPC server version mismatch: (\S+)"), "version mismatch",
     "the worker's ggml-rpc-server speaks RPC protocol {0}, which this llama-server does not: run the same "
     "llama.cpp build (or release) on both machines"),
    (re.compile(r"RPC not supported in this build|failed to find RPC backend"), "no RPC", NO_RPC),
)


def rpc_error(text: str) -> tuple[str, str] | None:
    """(kind, plain-words message) for an RPC failure in llama.cpp's output; None when there is none."""
    for rx, kind, message in _ERRORS:
        if (m := rx.search(text)) is not None:
            return kind, f"{kind}: " + message.format(*(g.rstrip(".") for g in m.groups()))
    return None
