"""The GUI process keeps large blocks out of its main heap (qt/heap.py), checked with glibc's own counters."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys
from llm_tuner.qt.heap import steady_heap

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2
if sys.argv[1] == "steady":
    assert steady_heap()
block = 4 << 20
first = bytearray(block)  # mapped on its own (above the threshold)
del first  # glibc's free raises the threshold to 4 MiB unless it was fixed
before = libc.mallinfo2().hblkhd
second = bytearray(block)
print(libc.mallinfo2().hblkhd - before >= block)  # mapped again (True), or taken from the main heap (False)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (Linux)")
def test_large_blocks_stay_out_of_the_main_heap_once_steady():
    def mapped_again(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip()

    assert mapped_again("default") == "False"  # glibc's own policy: the heap takes it (and grows in steps)
    assert mapped_again("steady") == "True"
