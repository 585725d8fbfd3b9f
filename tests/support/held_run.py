"""A `Run` (state.callbacks) that keeps each job until the test answers it: a slow background job, answered
late and in any order, so a state's stale-answer rules can be driven without threads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_tuner.state.callbacks import run_now


class Held:
    """`asked[i]` is the i-th (work, done, failed) handed over; `answer(i)` runs that work and hands on its
    result (or its exception); `done(i, result)` / `fail(i, exc)` answer without running it."""

    def __init__(self) -> None:
        self.asked: list[
            tuple[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]]
        ] = []

    def __call__(
        self, work: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[BaseException], None]
    ) -> None:
        self.asked.append((work, done, failed))

    def answer(self, index: int) -> None:
        run_now(*self.asked[index])

    def done(self, index: int, result: Any) -> None:
        self.asked[index][1](result)

    def fail(self, index: int, exc: BaseException) -> None:
        self.asked[index][2](exc)
