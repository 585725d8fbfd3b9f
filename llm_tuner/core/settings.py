"""User settings: what the user sets once (model folders, binaries, rates)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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
