"""Callbacks for plain state (glue's State and its callbacks, in small) and how a model has slow work run.

A model calls `notify(what, *details)` after it changed; each listener added with `add_callback` gets the
same arguments, on the caller's thread. A model never starts a thread: slow reads (a model file's header, RPC
workers' devices) go through the `Run` it was given, which a panel makes a BackgroundJob and a test `run_now`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Callback = Callable[..., None]
# run(work, done, failed): call `work()` (off the GUI thread, where the caller has one), then `done(result)`
# or `failed(exception)` back on the caller's thread
Run = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]], None]


def run_now(work: Callable[[], Any], done: Callable[[Any], None],
            failed: Callable[[BaseException], None]) -> None:
    """The `Run` without threads: the work now, then its answer (tests, and any caller without an event
    loop)."""
    try:
        result = work()
    except Exception as exc:  # noqa: BLE001 - handed to `failed`, as a background job hands it on
        failed(exc)
        return
    done(result)


class Observable:
    """State that tells its listeners what changed: `notify("slots")`, `notify("message", slot)`, ..."""

    def __init__(self) -> None:
        self._callbacks: list[Callback] = []

    def add_callback(self, callback: Callback) -> None:
        self._callbacks.append(callback)

    def remove_callback(self, callback: Callback) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def notify(self, what: str, *details: Any) -> None:
        for callback in tuple(self._callbacks):
            callback(what, *details)
