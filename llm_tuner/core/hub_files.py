"""A model repository's GGUF files as the Get-models dialog lists them: one row per model, not per file.

A repository lists files; a person picks a model. Split sets (`*-00001-of-00003.gguf`) are one model with
their parts in order, projectors (`mmproj*`) are kept apart, and each row carries its size and the sha256 the
repository gives for it (the hub gives one for every LFS file). The quantisation is read from the file
name until the header says (`ModelInfo.file_type`): names are what repositories are organised by.

Pure: the service (`services.hub`) turns the hub's listing into `RemoteFile`s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llm_tuner.core.gguf_info import split_parts

#: Quantisation names as GGUF repositories spell them in file names (llama.cpp's ftype names, the IQ and
#: ternary ones, Unsloth's UD- prefix kept out: it is a recipe, the type follows it).
_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])("
    r"I?Q[1-8]_(?:[0-9]|K|NL|XXS|XS|XL|S|M|L)(?:_(?:XXS|XS|XL|S|M|L|R4|R8|K))*"
    r"|TQ[12]_0|MXFP4(?:_MOE)?|BF16|F16|F32|FP16|FP32"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE)


def quant_from_name(name: str) -> str | None:
    """The quantisation a file name states (`Q4_K_M`, `IQ2_XXS`, `BF16`...), upper-cased; None when it states
    none. The last match wins: `Qwen3-8B-Q4_K_M.gguf` names its type after the model's name."""
    found = _QUANT_RE.findall(name.rsplit("/", 1)[-1])
    return found[-1].upper() if found else None


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repository: its path in the repository, size, and sha256 when the repository gives
    one."""

    path: str
    size_bytes: int
    sha256: str | None = None


@dataclass(frozen=True)
class RemoteModel:
    """One model of a repository: a single GGUF file or every part of a split set, in order.

    Attributes:
        repo_id: `owner/name`.
        revision: the branch or commit the listing is of.
        files: the parts (one for a single file); `files[0]` is what llama-server's `-m` takes.
        complete: False when a split set lacks parts in the listing (it cannot be downloaded whole).
    """

    repo_id: str
    revision: str
    files: tuple[RemoteFile, ...]
    is_projector: bool = False
    complete: bool = True

    @property
    def name(self) -> str:
        """The first file's path in the repository (folders included)."""
        return self.files[0].path

    @property
    def file_name(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    @property
    def quant(self) -> str | None:
        return quant_from_name(self.name)

    @property
    def has_checksums(self) -> bool:
        return all(f.sha256 for f in self.files)


def gguf_models(repo_id: str, revision: str, files: list[RemoteFile]) -> list[RemoteModel]:
    """The repository's GGUF models from its file list: split sets grouped (first part first), projectors
    last, the rest by path. Files that are not GGUF are left out."""
    ggufs = {f.path: f for f in files if f.path.lower().endswith(".gguf")}
    out: list[RemoteModel] = []
    for path in sorted(ggufs):
        folder, _, name = path.rpartition("/")
        parts = split_parts(name)
        projector = name.lower().startswith("mmproj")
        if parts is None:
            out.append(RemoteModel(repo_id, revision, (ggufs[path],), projector))
            continue
        prefix, number, count = parts
        if number != 1:
            continue
        where = f"{folder}/" if folder else ""
        names = [f"{where}{prefix}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
        present = tuple(ggufs[n] for n in names if n in ggufs)
        out.append(RemoteModel(repo_id, revision, present, projector, complete=len(present) == count))
    return sorted(out, key=lambda m: (m.is_projector, m.name))
