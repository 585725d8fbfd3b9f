"""model_cache: headers already read, keyed by (path, size, mtime_ns), so a rescan is near-instant.

One row per model (a split set is one row, under its first part's path). The ModelInfo is kept as
JSON together with the reader version that produced it; a row whose file changed (size or mtime)
or that an older reader wrote is a miss and is overwritten by the next read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import ValidationError
from sqlalchemy import BigInteger, Engine, Float, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from llm_tuner.core.gguf_info import READER_VERSION, ModelInfo
from llm_tuner.store.base import Base
from llm_tuner.store.db import session_scope


class ModelCacheRow(Base):
    __tablename__ = "model_cache"

    path: Mapped[str] = mapped_column(String, primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    mtime_ns: Mapped[int] = mapped_column(BigInteger, nullable=False)
    reader_version: Mapped[int] = mapped_column(Integer, nullable=False)
    info_json: Mapped[str] = mapped_column(Text, nullable=False)
    read_at: Mapped[float] = mapped_column(Float, nullable=False)


class ModelCacheRepo:
    """Get and put ModelInfo by (path, size, mtime_ns). Returns frozen core models, never rows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get_many(self, keys: Sequence[tuple[str, int, int]]) -> dict[str, ModelInfo]:
        """Cached infos whose path, size and mtime_ns all match (path -> info); others are misses."""
        wanted = {path: (size, mtime) for path, size, mtime in keys}
        out: dict[str, ModelInfo] = {}
        paths = list(wanted)
        with session_scope(self.engine) as s:
            for i in range(0, len(paths), 500):
                rows = s.execute(select(ModelCacheRow.path, ModelCacheRow.size_bytes, ModelCacheRow.mtime_ns,
                                        ModelCacheRow.reader_version, ModelCacheRow.info_json)
                                 .where(ModelCacheRow.path.in_(paths[i:i + 500]))).all()
                for path, size, mtime, version, info_json in rows:
                    if version != READER_VERSION or wanted[path] != (size, mtime):
                        continue
                    try:
                        out[path] = ModelInfo.model_validate_json(info_json)
                    except ValidationError:
                        continue
        return out

    def get(self, path: str, size_bytes: int, mtime_ns: int) -> ModelInfo | None:
        return self.get_many([(path, size_bytes, mtime_ns)]).get(path)

    def put_many(self, items: Sequence[tuple[str, int, int, ModelInfo]]) -> None:
        """Store (path, size, mtime_ns, info) rows, replacing older ones for the same path."""
        if not items:
            return
        now = time.time()
        with session_scope(self.engine) as s:
            for path, size, mtime, info in items:
                s.merge(ModelCacheRow(path=path, size_bytes=size, mtime_ns=mtime, reader_version=READER_VERSION,
                                      info_json=info.model_dump_json(), read_at=now))

    def count(self) -> int:
        with session_scope(self.engine) as s:
            return len(s.execute(select(ModelCacheRow.path)).all())
