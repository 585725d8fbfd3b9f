"""What a launch of llama-server will run: the user's flags, the app's watch flags, the environment.

A LaunchPlan is built before anything starts, so the Live panel and the CLI can show the exact command
(secrets masked) and what the app adds or drops; services.server runs it. The ports a launch takes are chosen
and checked here too (free_port, port_in_use).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.cmdline import FlagCatalog, profile_to_argv, render_shell, respell
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.process import child_env


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (checked before a launch)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex((host if host not in ("0.0.0.0", "") else "127.0.0.1", port)) == 0


def config_ini_paths(env: Mapping[str, str] | None = None) -> list[Path]:
    """llama.cpp's config files that apply to every launch (before env vars and flags), if present."""
    env = os.environ if env is None else env
    candidates = [Path("/etc/llama.cpp/config.ini")]
    xdg = env.get("XDG_CONFIG_HOME")
    home = env.get("HOME")
    if xdg:
        candidates.append(Path(xdg) / "llama.cpp" / "config.ini")
    elif home:
        candidates.append(Path(home) / ".config" / "llama.cpp" / "config.ini")
    return [p for p in candidates if p.is_file()]


@dataclass(frozen=True)
class LaunchPlan:
    """Exactly what a launch will run, with the parts the app adds kept apart from the user's.

    `user_args` are the profile's flags; `watch_args` are what the app adds to watch the server
    (`--metrics`, `--log-jsonl`); `env_set` is the profile's environment on top of the inherited one;
    `dropped_env` are inherited LLAMA_ARG_* variables removed (they would change the launch silently);
    `config_files` are llama.cpp config.ini files that still apply (shown, not removable).
    `user_args` keep secret flags (`--api-key`, `--hf-token`) as the user wrote them (shown masked);
    `argv`, what runs and what the history stores, does not: secrets travel in `env` (see
    core.flags.secrets_to_env).
    """

    binary: str
    user_args: tuple[str, ...]
    watch_args: tuple[str, ...]
    env_set: dict[str, str]
    dropped_env: dict[str, str]
    config_files: tuple[str, ...]
    host: str
    port: int
    env: dict[str, str]  # the full child environment

    @property
    def argv(self) -> list[str]:
        """What the process runs with (and what the history stores): no secret in it (see plan_launch)."""
        return [self.binary, *flags.secrets_to_env(self.user_args, {})[0], *self.watch_args]

    @property
    def api_key(self) -> str | None:
        """The key a client of this server sends (the first one it accepts), or None. The child's whole
        environment counts: an inherited LLAMA_API_KEY also locks the server."""
        keys = flags.api_keys(self.env)
        return keys[0] if keys else None

    @property
    def url(self) -> str:
        host = self.host if self.host not in ("0.0.0.0", "", "::") else "127.0.0.1"
        return f"http://{('[' + host + ']') if ':' in host else host}:{self.port}"

    def command_line(self, *, include_watch: bool = False, mask_secrets: bool = True) -> str:
        """A shell line a user can copy: the profile's env, the binary and the user's flags (secrets masked
        unless asked, by the one masking of core.cmdline.render_shell)."""
        args = [*self.user_args, *(self.watch_args if include_watch else ())]
        return render_shell(args, dict(sorted(self.env_set.items())), binary=self.binary, mask_secrets=mask_secrets)

    def notes(self) -> list[str]:
        out = []
        for p in self.config_files:
            out.append(f"llama.cpp config file {p} applies to this launch (before environment and flags)")
        for k, v in sorted(self.dropped_env.items()):
            out.append(f"inherited {k}={v} is not passed on (set it in the profile to use it)")
        if self.watch_args:
            out.append("added for watching: " + " ".join(self.watch_args))
        return out


def plan_launch(binary: str | Path, user_args: list[str], profile_env: dict[str, str] | None = None, *,
                catalog: FlagCatalog | None = None, watch: bool = True, base_env: dict[str, str] | None = None,
                port: int | None = None) -> LaunchPlan:
    """Build the launch: user flags + watch flags, and a clean environment.

    * `--metrics` is added unless the user's flags have it; `--log-jsonl` where the binary's catalog
      lists it (it carries the memory breakdown at any verbosity). `watch=False` adds nothing.
    * Inherited LLAMA_ARG_* variables are dropped unless the profile sets them.
    * CUDA_DEVICE_ORDER=PCI_BUS_ID unless the user set it (so CUDA numbering matches NVML's).
    * With no --port, a free port is chosen and added to the user's flags (it is part of the command).
    * Secrets (`--api-key`, `--hf-token`) stay out of the process's argv (visible to every user in `ps`)
      and go in its environment (owner-only); `command_line()` still shows them, masked unless asked.
    * The environment is the one child environment of every llama.cpp process (services.process.child_env).
    """
    profile_env = dict(profile_env or {})
    env, dropped = child_env(profile_env, base_env)
    # each flag as this binary's --help spells it (the user's own if listed)
    args = respell(user_args, catalog)
    _rest, env = flags.secrets_to_env(args, env)
    effective = flags.effective_argv(args, profile_env)
    host = flags.value_of(effective, "host") or "127.0.0.1"
    port_s = flags.value_of(effective, "port")
    if port_s is None:
        port_s = str(port or free_port())
        args += flags.argv_for("port", port_s)
    watch_args: list[str] = []
    if watch:
        if not flags.has(effective, "metrics"):
            watch_args += flags.argv_for("metrics")
        known = catalog.lookup if catalog is not None else None
        if known is not None and known(flags.spelling("log_jsonl")) is not None and not flags.has(args, "log_jsonl"):
            watch_args += flags.argv_for("log_jsonl")
        if flags.has(effective, "rpc") and not flags.has(effective, "verbosity"):
            # RPC devices' memory is known only from -lv 4 buffer lines at load (the breakdown comes at exit),
            # and their endpoints from the device list it prints
            watch_args += flags.argv_for("verbosity", "4")
    base = dict(os.environ if base_env is None else base_env)
    return LaunchPlan(binary=str(binary), user_args=tuple(args), watch_args=tuple(watch_args), env_set=profile_env,
                      dropped_env=dropped, config_files=tuple(str(p) for p in config_ini_paths(base)),
                      host=host.split(",")[0], port=int(port_s), env=env)


def plan_from_profile(binary: str | Path, profile: LaunchProfile, **kwargs: Any) -> LaunchPlan:
    """A LaunchProfile -> LaunchPlan, its flags spelled as the binary's catalog (when given) lists them."""
    argv, env = profile_to_argv(profile, kwargs.get("catalog"))
    return plan_launch(binary, list(argv), dict(env), **kwargs)
