"""A steady heap for the long-running GUI process (glibc on Linux).

glibc serves a large block (128 KiB and more) from a mapping of its own, returned to the system when freed,
but each such free raises that threshold to the freed size (up to 32 MiB): after the first paint buffers of a
view are freed, the later ones come from the main heap, which then grows in steps that it does not give back.
In Live that was 1.3-2.4 MiB of RSS at every switch between its tabs, for as long as the app ran (issue 26:
benchmarks/results/live_load/live_load_profile.txt). Setting the threshold fixes it at glibc's default again.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
MMAP_THRESHOLD = 128 * 1024  # glibc's default threshold, kept from now on


def steady_heap() -> bool:
    """Fix glibc's mmap threshold for this process (its children are not affected). False where there is no
    glibc mallopt (macOS, Windows, musl's stub) or it refused; nothing changes then."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
