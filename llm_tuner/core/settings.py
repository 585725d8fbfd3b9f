"""User settings: what the user sets once (model folders, binaries, rates)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TrustedBinary(BaseModel):
    """A program the user confirmed may run (Profile tab's Confirm, or `--trust-binary`), as it was then.

    Keyed by the resolved path and the file's size and modification time: a file replaced at that path
    after the confirmation is not trusted until confirmed again.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    mtime_ns: int


class Settings(BaseModel):
    """Settings kept in settings.json under the config folder. Unknown keys are kept for forward compatibility."""

    model_config = ConfigDict(extra="allow")

    model_folders: list[str] = Field(default_factory=list)
    llama_server_path: str | None = None
    llama_bench_path: str | None = None
    llama_fit_params_path: str | None = None
    data_dir: str | None = None  # the SQLite history's folder; None = the platform's data folder
    gpu_sample_hz: float = 2.0
    host_sample_hz: float = 1.0
    server_metrics_hz: float = 1.0
    ab_threshold_pct: float = 2.0
    # programs named by a profile (a pasted command, a shared JSON) that the user confirmed may run
    trusted_binaries: list[TrustedBinary] = Field(default_factory=list)
