"""What the hub's download and the chat share: Ctrl-C (and SIGTERM) as a cancel, and a count argument.

A leaf of the cli package (it imports none of the commands).
"""

from __future__ import annotations

import argparse
import signal
import threading
import time


class Interrupt:
    """Within `with Interrupt() as stop:`, Ctrl-C (SIGINT) and SIGTERM set `stop.event` instead of raising, so
    the work polling it (a download between chunks, a streamed reply) stops cleanly and keeps what it has; a
    KeyboardInterrupt raised inside a client library could land anywhere. The previous handlers come back
    after."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict = {}
        self._t0 = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since this was made."""
        return time.monotonic() - self._t0

    def __enter__(self) -> Interrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, lambda *_a: self.event.set())
            except ValueError:  # not the main thread: no signal handling there
                pass
        return self

    def __exit__(self, *_exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of 1 or more (argparse says which argument is wrong)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("give 1 or more")
    return value
