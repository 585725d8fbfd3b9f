"""The Paste command dialog as plain state: the pasted text read as a profile (only tokenised: never run,
never given to a shell), the report of what was understood, what is unknown and what was removed, and
whether it can be imported.

The reading goes through the `Run` given (the dialog's BackgroundJob, after a typing pause; `run_now` in
tests), one at a time: an edit while a reading runs makes that reading stale, and when it ends the state
says "stale" so the view reads the newest text. Text over core.cmdline.PASTE_LIMIT_CHARS is refused with a
message instead of being read; a profile with a NUL byte, or a wrong paste (no model, no flag: `profile
import` exits 2), is reported and not importable.

Declared properties (said once per change): "result" (the ImportResult to import; None: Import waits or is
refused), "report" (HTML). Besides: "read" after every answer (the report describes the text as it is),
"stale" (the text changed while it was read).
"""

from __future__ import annotations

import html
from collections.abc import Callable

from llm_tuner.core.cmdline import (
    PASTE_LIMIT_CHARS,
    FlagCatalog,
    ImportResult,
    import_command,
    profile_to_argv,
    render_shell,
)
from llm_tuner.core.profile import nul_fields
from llm_tuner.state.callbacks import Declared, Observable, Run, run_now

NOTHING_YET = "Nothing pasted yet."


def read_command(text: str, catalog: FlagCatalog | None) -> tuple[ImportResult, str]:
    """The import and its report (HTML): the slow part, off the GUI thread."""
    r = import_command(text, catalog)
    argv, env = profile_to_argv(r.profile)
    shell = html.escape(render_shell(argv, env, binary=r.profile.binary))
    parts = [f"<b>Understood as</b><br><code>{shell}</code>"]
    if r.bad_values:
        parts.append(
            "<b>Values llama-server refuses</b> (kept as written; fix them in the editor)<ul>"
            + "".join(f"<li>{html.escape(b.removesuffix(': kept as written'))}</li>" for b in r.bad_values)
            + "</ul>"
        )
    if r.unknown:
        parts.append(
            "<b>Not known to this llama-server</b> (kept as written, in order): "
            f"<code>{html.escape(' '.join(r.unknown))}</code>"
        )
    for rem in r.removed:
        parts.append(
            f"<b>Removed flag</b> <code>{html.escape(' '.join(rem.tokens))}</code>: use "
            f"<code>{html.escape(rem.replacement)}</code> (kept as written; fix it in the editor)"
        )
    notes = [n for n in r.notes if "was removed" not in n]
    if notes:
        parts.append("<b>Notes</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    return r, "<br><br>".join(parts)


class PasteState(Observable):
    """A pasted command, read as a profile, and whether Import takes it."""

    result = Declared[ImportResult | None](None, topic="result", same=lambda a, b: a is b)
    report = Declared[str](NOTHING_YET, topic="report")

    def __init__(
        self,
        catalog: FlagCatalog | None,
        *,
        read: Callable[[str, FlagCatalog | None], tuple[ImportResult, str]] = read_command,
        run: Run = run_now,
    ) -> None:
        super().__init__()
        self.catalog = catalog
        self.read = read
        self.run = run
        self.generation = 0  # bumped at every edit: a reading of older text is dropped
        self.shown = 0  # the generation the report describes
        self.reading = False

    def edited(self) -> None:
        """The text changed: Import waits for its reading."""
        self.generation += 1
        self.result = None

    def read_text(self, text: str) -> None:
        """Read `text` (through `run`), or say why not; a reading already running goes first."""
        if not text.strip():
            self._show(None, NOTHING_YET)
            return
        if len(text) > PASTE_LIMIT_CHARS:
            self._show(
                None,
                f"<b>Not read:</b> this is {len(text) // 1024} KiB of text, and a llama-server command line "
                f"is a few KiB (the limit is {PASTE_LIMIT_CHARS // 1024} KiB). Paste only the command.",
            )
            return
        if self.reading:  # one reading at a time: the newest text is read when it ends
            return
        self.reading = True
        generation, catalog, read = self.generation, self.catalog, self.read
        self.run(
            lambda: read(text, catalog),
            lambda answer: self._finished(lambda: self._read(generation, *answer)),
            lambda exc: self._finished(lambda: self._failed(generation, exc)),
        )

    def _finished(self, then: Callable[[], None]) -> None:
        try:
            then()
        finally:
            self.reading = False
            if self.shown != self.generation:
                self.notify("stale")  # the text changed while it was read: read the newest

    def _read(self, generation: int, result: ImportResult, report: str) -> None:
        if generation != self.generation:
            return
        bad = nul_fields(result.profile)
        if bad:
            self._show(
                None,
                f"<b>Not importable:</b> {html.escape(', '.join(bad))} holds a NUL byte (\\0), which no "
                "program can take. Remove it from the text.",
            )
            return
        if result.problem:  # a wrong paste (no model, no flag): as `profile import` exits 2
            self._show(None, f"<b>Not importable:</b> {html.escape(result.problem)}.<br><br>{report}")
            return
        self._show(result, report)

    def _failed(self, generation: int, exc: BaseException) -> None:
        if generation == self.generation:
            self._show(None, f"<b>Could not read the text:</b> {html.escape(str(exc))}")

    def _show(self, result: ImportResult | None, report: str) -> None:
        self.shown = self.generation
        self.result = result
        self.report = report
        self.notify("read")
