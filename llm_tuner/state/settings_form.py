"""The Settings dialog's form as plain data, and the settings it makes: a program path left empty means "find
it automatically" (None), a data folder left empty the default one, a model folder is listed once; every key
of the original settings the form does not show is kept. The RPC workers' list is state.workers'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llm_tuner.core.settings import RpcWorker, Settings


@dataclass(frozen=True)
class SettingsForm:
    """What the dialog's fields hold (texts as typed)."""

    model_folders: tuple[str, ...] = ()
    llama_server_path: str = ""
    llama_bench_path: str = ""
    llama_fit_params_path: str = ""
    rpc_server_path: str = ""
    data_dir: str = ""
    gpu_sample_hz: float = 1.0
    host_sample_hz: float = 1.0
    server_metrics_hz: float = 1.0
    ab_threshold_pct: float = 2.0
    rpc_workers: tuple[RpcWorker, ...] = field(default_factory=tuple)


def form_of(settings: Settings) -> SettingsForm:
    """The form filled from `settings`."""
    return SettingsForm(
        tuple(settings.model_folders),
        settings.llama_server_path or "",
        settings.llama_bench_path or "",
        settings.llama_fit_params_path or "",
        settings.rpc_server_path or "",
        settings.data_dir or "",
        settings.gpu_sample_hz,
        settings.host_sample_hz,
        settings.server_metrics_hz,
        settings.ab_threshold_pct,
        tuple(settings.rpc_workers),
    )


def _path(text: str) -> str | None:
    return text.strip() or None


def edited_settings(original: Settings, form: SettingsForm) -> Settings:
    """The settings the form makes (unknown keys of the original are kept)."""
    return original.model_copy(
        update={
            "model_folders": list(form.model_folders),
            "llama_server_path": _path(form.llama_server_path),
            "llama_bench_path": _path(form.llama_bench_path),
            "llama_fit_params_path": _path(form.llama_fit_params_path),
            "rpc_server_path": _path(form.rpc_server_path),
            "rpc_workers": list(form.rpc_workers),
            "data_dir": _path(form.data_dir),
            "gpu_sample_hz": form.gpu_sample_hz,
            "host_sample_hz": form.host_sample_hz,
            "server_metrics_hz": form.server_metrics_hz,
            "ab_threshold_pct": form.ab_threshold_pct,
        }
    )


def with_folder(folders: Sequence[str], folder: str) -> tuple[str, ...]:
    """The model folders with `folder` added at the end, unless it is listed already (or empty)."""
    folders = tuple(folders)
    return folders if not folder or folder in folders else (*folders, folder)
