"""A real small file system for tests of a full disk: a tmpfs mounted in a test's folder (`mount -t tmpfs`, which
needs root, as the test machines run). Where mounting is not permitted the test skips: a file size limit
(RLIMIT_FSIZE) gives EFBIG, another error than a full disk's, so it would not test the same thing."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_disk(parent: Path, size: str = "1m") -> Iterator[Path]:
    """A folder on a tmpfs of `size` (mount's spelling: 1m, 8m), unmounted after."""
    mnt = parent / f"tiny-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tiny file system here ({made.stderr.strip()})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(folder: Path) -> None:
    """Take all the free space of `folder`'s file system with one file (`filler`)."""
    with open(folder / "filler", "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
