"""The Plan settings box's rule for a profile value a control cannot show, as plain state.

A value beyond a spin box's range, or not among a list's choices, is left as it is in the profile: the
control is marked, its tooltip and the note under the box say why, and nothing is written back until the
user sets that control (`user_set`). The controls' ranges and choices are the view's; the words and which
controls are marked are here.
"""

from __future__ import annotations

from collections.abc import Sequence

WARN_COLOUR = "#b15d00"


def beyond_range(flag: str, value: int, low: int, high: int, written: str | None = None) -> str | None:
    """Why a spin box of `low`..`high` cannot show `value` (`written`: the value as the flag reads it, where
    the box has no number for it), or None when it can."""
    if low <= value <= high:
        return None
    if written:
        return f"{flag} {written} is not a value this box offers"
    return f"{flag} {value} is beyond what this box holds ({low} to {high})"


def not_a_choice(flag: str, value: object, choices: Sequence[str]) -> str | None:
    """Why a list of `choices` cannot show `value`, or None when it can."""
    return None if str(value) in choices else f"{flag} {value} is not among this list's choices"


def control_tip(why: str) -> str:
    return f"{why}: the profile keeps it; set a value here to replace it"


class UnshownValues:
    """The controls (by key) that cannot show the profile's value, and why."""

    def __init__(self) -> None:
        self.why: dict[str, str] = {}

    def clear(self) -> None:
        """The profile's values are shown again from the start."""
        self.why = {}

    def note(self, key: str, why: str | None) -> None:
        if why:
            self.why[key] = why

    def user_set(self, key: str) -> bool:
        """The user set control `key`: the profile takes its value now (True: it was marked)."""
        return self.why.pop(key, None) is not None

    @property
    def text(self) -> str:
        """The note under the box ('' when every value is shown)."""
        if not self.why:
            return ""
        return (
            "The profile's " + "; ".join(self.why.values()) + ". Kept as it is: the box shows another "
            "value until you set one here (or edit it in the Profile tab)."
        )
