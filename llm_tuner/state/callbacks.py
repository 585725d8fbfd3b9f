"""Callbacks for plain state (glue's State and its callbacks, in small) and how a model has slow work run.

A model calls `notify(what, *details)` after it changed; each listener added with `add_callback` gets the
same arguments, on the caller's thread. `Declared` is glue's CallbackProperty in small: a typed attribute
whose assignment notifies its topic once, only when the value changed.

A model never starts a thread: slow reads (a model file's header, RPC
workers' devices) go through the `Run` it was given, which a panel makes a BackgroundJob and a test `run_now`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

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


class Jobs:
    """A state's `Run` that keeps the words of the work handed to it last: `jobs("Reading x", work, done,
    failed)`; the view's `Run` names its background job with `jobs.doing` (what a failure is reported as)."""

    def __init__(self, run: Run = run_now) -> None:
        self.run = run
        self.doing = ""

    def __call__(self, doing: str, work: Callable[[], Any], done: Callable[[Any], None],
                 failed: Callable[[BaseException], None]) -> None:
        self.doing = doing
        self.run(work, done, failed)


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


def _same(old: object, new: object) -> bool:
    return old is new or bool(old == new)


class Declared(Generic[T]):
    """A typed property of an `Observable` (glue's CallbackProperty): `x = Declared[int](0, topic="size")`.

    Reading gives the value (the default until set); setting it to a different value stores it and calls
    `notify(topic, value)` once; setting an equal value tells nobody. A mutable default comes from a
    `factory`, one per instance."""

    def __init__(self, default: T | None = None, *, topic: str, factory: Callable[[], T] | None = None,
                 same: Callable[[object, object], bool] = _same) -> None:
        self.default = default
        self.factory = factory
        self.topic = topic
        self.same = same
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Declared[T]: ...

    @overload
    def __get__(self, obj: Observable, owner: type | None = None) -> T: ...

    def __get__(self, obj: Observable | None, owner: type | None = None) -> Declared[T] | T:
        if obj is None:
            return self
        values = obj.__dict__
        if self.name not in values:
            values[self.name] = self.factory() if self.factory is not None else self.default
        value: T = values[self.name]
        return value

    def __set__(self, obj: Observable, value: T) -> None:
        if self.same(self.__get__(obj), value):
            return
        obj.__dict__[self.name] = value
        obj.notify(self.topic, value)


def declared(cls: type) -> dict[str, Declared[Any]]:
    """The declared properties of a state class (its own and its bases'), by attribute name."""
    found: dict[str, Declared[Any]] = {}
    for klass in reversed(cls.__mro__):
        found.update({k: v for k, v in vars(klass).items() if isinstance(v, Declared)})
    return found


class JobProgress(Observable):
    """A view's long job (a benchmark, a tune) as its state tells it: whether it runs, the status line, how
    far it got (0..1) and where a cancelled one stopped. Listeners get "running" and "status"."""

    def __init__(self, status: str = "") -> None:
        super().__init__()
        self._running = False
        self._status = status
        self._progress = 0.0
        self._progress_note = ""

    @property
    def running(self) -> bool:
        """A job runs (or waits to start): the start buttons wait; Cancel acts."""
        return self._running

    @property
    def status(self) -> str:
        """The line under the buttons."""
        return self._status

    @property
    def progress(self) -> float:
        return self._progress

    @property
    def progress_note(self) -> str:
        """'' while going, 'cancelled' where a cancelled job stopped."""
        return self._progress_note

    def set_running(self, running: bool) -> None:
        if running != self._running:
            self._running = running
            self.notify("running")

    def begin(self, what: str) -> None:
        """A job started: from nought, said."""
        self._progress, self._progress_note = 0.0, ""
        self.set_running(True)
        self.say(f"{what}: starting…")

    def progressed(self, fraction: float, text: str) -> None:
        """The job's progress (fraction -1: not known) and its words."""
        if fraction >= 0:
            self._progress = fraction
        self.say(text)

    def stopped_at(self, text: str, *, cancelled: bool = True, fraction: float | None = None) -> None:
        """Where the job stopped (cancelled: the session drops the runner's last 100 %), or that it is done
        (`fraction` 1.0)."""
        if cancelled:
            self._progress_note = "cancelled"
        if fraction is not None:
            self._progress = fraction
        self.say(text)

    def say(self, text: str) -> None:
        self._status = text
        self.notify("status")
