"""The Profile editor's "All flags" section, its words and rules as plain functions: the header (how many
flags it adds, how many are text only), the line of flags the binary's `--help` does not list, and which
listed rows a search leaves (every word in the row's text; a flag with a hand-made field only while
searching). The fields' values are core.cmdline's (`read_value`, `write_value`); the section's widgets and
its sliced build are the view's (ui/panels/profile_all_flags.py)."""

from __future__ import annotations

from collections.abc import Sequence

from llm_tuner.core.cmdline import FlagCatalog, classify, unlisted_flags

HEADER_TIP = (
    "Every flag of this llama-server's --help without a field above, grouped as --help groups them; "
    "what you set here is written in Extra arguments"
)


def header_text(catalog: FlagCatalog | None) -> str:
    """The section's toggle: short (the editor column is narrow on a 1366 px screen)."""
    if catalog is None:
        return "All flags"
    sorted_flags = classify(catalog)
    return f"All flags: {len(sorted_flags.generated)} more" + (
        f", {len(sorted_flags.text_only)} text only" if sorted_flags.text_only else ""
    )


def unlisted_text(args: Sequence[str], catalog: FlagCatalog) -> str:
    """The flags of the Extra arguments this binary's --help does not list ('' when none)."""
    unlisted = unlisted_flags(args, catalog)
    if not unlisted:
        return ""
    return "Not in this llama-server's --help (kept as written; edit them in Extra arguments): " + "  ".join(
        unlisted
    )


def search_words(text: str) -> list[str]:
    return text.lower().split()


def row_matches(haystack: str, words: Sequence[str], *, hand_made: bool = False) -> bool:
    """Whether a row (its text in lower case) stays listed for the search `words`: every word is in it; a
    flag with a hand-made field is listed only while searching."""
    return all(w in haystack for w in words) and (bool(words) or not hand_made)
