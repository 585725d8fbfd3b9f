"""Failures a service survives on purpose, logged once per kind (nvitop's `nvmlQuery` style).

A loop that must go on (a log reader, a telemetry sampler, a supervision callback) catches what a consumer or
a sensor raises; each kind of failure (where + exception type) is written to the log the first time, so a bug
is seen without flooding the log at 15 samples a second.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

_seen: set[tuple[str, str]] = set()
_lock = threading.Lock()


def log_once(where: str, exc: BaseException, *, logger: logging.Logger | None = None,
             trace: bool = True) -> bool:
    """Log `exc` (with its traceback, unless not `trace`: a remote server's bad answer, whose words say it all
    and whose traceback only shows our own reading code) under `where` unless this kind was logged already;
    True when logged."""
    key = (where, type(exc).__qualname__)
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    if not trace:  # in words only: what was read, and what was wrong with the answer
        (logger or log).warning("%s: %s (later failures of this kind are not logged)", where, exc)
        return True
    (logger or log).warning("%s: %s: %s (later failures of this kind are not logged)", where,
                            type(exc).__name__, exc, exc_info=exc)
    return True
