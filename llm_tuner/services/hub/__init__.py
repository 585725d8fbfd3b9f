"""Get models from a model hub (Hugging Face's, or a mirror through `HF_ENDPOINT`): search, a repository's
GGUF models with each one's memory plan from its header alone (range requests), and downloads that resume and
are checked. The package, by seam: `client` (the hub through `huggingface_hub`: settings from the environment,
search, listing, where a file is), `ranged` (RangeFile, read_remote_model, default_plan), `download`
(download_model: a disk-space check first, progress, cancel, resume, sha256). Import from the package.
"""

from __future__ import annotations

from llm_tuner.services.hub.client import (
    BAD_INPUT_ERRORS,
    DEFAULT_ENDPOINT,
    FileLocation,
    Hub,
    RepoHit,
    describe_error,
    list_gguf_models,
    locate,
    search_models,
)
from llm_tuner.services.hub.download import (
    ChecksumError,
    DownloadCancelled,
    DownloadProgress,
    NotEnoughSpace,
    destination,
    download_folder,
    download_model,
    missing_bytes,
    partial_path,
)
from llm_tuner.services.hub.ranged import (
    MAX_HEADER_BYTES,
    RangeFile,
    default_plan,
    plan_text,
    read_remote_model,
)

__all__ = [
    "BAD_INPUT_ERRORS",
    "ChecksumError",
    "DEFAULT_ENDPOINT",
    "DownloadCancelled",
    "DownloadProgress",
    "FileLocation",
    "Hub",
    "MAX_HEADER_BYTES",
    "NotEnoughSpace",
    "RangeFile",
    "RepoHit",
    "default_plan",
    "describe_error",
    "destination",
    "download_folder",
    "download_model",
    "list_gguf_models",
    "locate",
    "missing_bytes",
    "partial_path",
    "plan_text",
    "read_remote_model",
    "search_models",
]
