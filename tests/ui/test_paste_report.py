"""Issue 35 item 7: the paste report keeps bad values of known flags apart from flags this llama-server does not
know, and a fork's short flag gets no "did you mean" that changes its meaning (`-tbq` is not `-tb`)."""

from __future__ import annotations

from llm_tuner.core.advice import advise
from llm_tuner.core.cmdline import import_command
from llm_tuner.services.binaries import default_catalog
from llm_tuner.ui.dialogs.paste_command_dialog import PasteCommandDialog


def test_bad_values_are_not_listed_as_unknown_flags(qtbot):
    dlg = PasteCommandDialog(default_catalog())
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.read_finished, timeout=5000):
        dlg.set_text("llama-server -m m.gguf -fa maybe -c abc -tbq 4")
    text = dlg.report.text()
    refused, _, unknown = text.partition("Not known to this llama-server")
    assert "Values llama-server refuses" in refused
    assert "-fa takes on|off|auto, got &#x27;maybe&#x27;" in refused and "-c needs a whole number" in refused
    assert "<code>-tbq 4</code>" in unknown and "maybe" not in unknown and "abc" not in unknown
    assert dlg.result is not None and dlg.result.unknown == ["-tbq", "4"]
    assert dlg.result.profile.extra_args == ("-fa", "maybe", "-c", "abc", "-tbq", "4")  # all kept as written


def test_a_forks_short_flag_gets_no_suggestion_that_changes_meaning():
    catalog = default_catalog()
    assert catalog.suggest("-tbq") is None and catalog.suggest("-ctq") is None
    assert catalog.suggest("--ctx-sise") == "--ctx-size"  # a long typo still gets its fix
    found = {a.id: a.message for a in advise(import_command("-m m.gguf -tbq 4", catalog).profile, catalog)}
    assert "-tbq" in found["unknown-flag"] and "did you mean" not in found["unknown-flag"]
