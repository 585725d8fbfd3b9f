"""User settings: what the user sets once (model folders, binaries, rates)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from llm_tuner.core.stats import AB_THRESHOLD_PCT


class TrustedBinary(BaseModel):
    """A program the user confirmed may run (Profile tab's Confirm, or `--trust-binary`), as it was then.

    Keyed by the resolved path and the file's size and modification time: a file replaced at that path
    after the confirmation is not trusted until confirmed again.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    mtime_ns: int


class RpcWorker(BaseModel):
    """A llama.cpp RPC worker (`ggml-rpc-server` at `endpoint`, host:port) and, optionally, the `llm-tuner
    agent` on its machine that serves its GPU telemetry (`agent_url`, and the token it printed)."""

    model_config = ConfigDict(frozen=True)

    endpoint: str
    agent_url: str | None = None
    agent_token: str | None = None


class Settings(BaseModel):
    """Settings kept in settings.json under the config folder. Unknown keys are kept for forward
    compatibility."""

    model_config = ConfigDict(extra="allow")

    model_folders: list[str] = Field(default_factory=list)
    llama_server_path: str | None = None
    llama_bench_path: str | None = None
    llama_fit_params_path: str | None = None
    rpc_server_path: str | None = None  # ggml-rpc-server for local workers; None = PATH or the built-in one
    rpc_workers: list[RpcWorker] = Field(default_factory=list)
    data_dir: str | None = None  # the SQLite history's folder; None = the platform's data folder
    gpu_sample_hz: float = 2.0
    host_sample_hz: float = 1.0
    server_metrics_hz: float = 1.0
    ab_threshold_pct: float = AB_THRESHOLD_PCT
    # programs named by a profile (a pasted command, a shared JSON) that the user confirmed may run
    trusted_binaries: list[TrustedBinary] = Field(default_factory=list)
