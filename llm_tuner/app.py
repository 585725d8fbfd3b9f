"""Composition root: builds the engine, services, shared state and the window; `main()`.

`llm-tuner` with no command opens the window; with a command (`devices`, `profile`, `bench`, ...)
it runs the headless CLI instead.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

from llm_tuner import __version__

log = logging.getLogger("llm_tuner")
DATABASE_EXIT = 4  # as the CLI's: the history database is damaged or from a newer version


class _PrivateLogHandler(logging.handlers.RotatingFileHandler):
    """The app log, created (and re-created at each rotation) readable by its owner only."""

    def _open(self):
        stream = super()._open()
        os.chmod(self.baseFilename, 0o600)
        return stream

    def handleError(self, record) -> None:  # noqa: N802 - logging's name
        """A line the log cannot take (its disk is full): lost quietly, never a traceback on the user's
        terminal; the command's own error line says what is wrong."""


def setup_logging() -> None:
    from llm_tuner.services.paths import log_dir

    root = logging.getLogger()
    path = log_dir() / "llm-tuner.log"
    for old in [h for h in root.handlers if getattr(h, "_llm_tuner", False)]:
        if old.baseFilename == str(path):
            return
        root.removeHandler(old)
        old.close()
    handler = _PrivateLogHandler(path, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    handler._llm_tuner = True
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # a line per HTTP request (every /tokenize of a benchmark) buries ours
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    check_file_modes()


def check_file_modes() -> None:
    """At start: our files 0600 and folders 0700 (a note per change), a warning for a chosen data folder that
    others can read (it is the user's: not changed)."""
    from llm_tuner.services.paths import data_dir_override, readable_by_others, tighten_app_files
    from llm_tuner.services.settings_store import load_settings

    for note in tighten_app_files():
        log.info("file permissions: %s", note)
    chosen = load_settings().data_dir
    if chosen and not data_dir_override() and readable_by_others(Path(chosen).expanduser()):
        log.warning("the data folder %s (chosen in Settings) can be read by other users; the history "
                    "database in it may hold API keys of saved profiles: consider 'chmod 700 %s'",
                    chosen, chosen)


def _is_cli(argv: list[str]) -> bool:
    return any(not a.startswith("-") for a in argv[:1]) or bool({"--version", "-h", "--help"} & set(argv))


def _open_history(path: Path, smoke_test: bool):
    """The engine, or None when the database is unusable and the user did not agree to a fresh one.

    A damaged or newer file gets one dialog; "start fresh" moves it aside (never overwritten or deleted).
    Under --smoke-test nobody can answer: the message goes to stderr and the start fails.
    """
    from llm_tuner.store.db import DatabaseError, move_aside, open_engine

    try:
        return close_interrupted_sessions(open_engine(path))
    except DatabaseError as exc:
        log.error("%s", exc)
        if smoke_test:
            print(f"llm-tuner: error: {exc}", file=sys.stderr)
            return None
        from llm_tuner.ui.main_window import ask_fresh_database

        if not ask_fresh_database(str(exc)):
            return None
        moved = move_aside(path)
        log.warning("the unusable history database was moved to %s; starting with a fresh one", moved)
        return open_engine(path)


def close_interrupted_sessions(engine):
    """Sessions a killed app left open are closed as interrupted (never a running instance's); noted in the
    log."""
    from llm_tuner.store.sessions import SessionRepository

    n = SessionRepository(engine).close_interrupted()
    if n:
        log.info("closed %d session(s) left open by a process that is gone, as interrupted", n)
    return engine


def build_window(smoke_test: bool = False):
    """Create QApplication (if needed), the context and the main window; start background probes.

    Returns (app, ctx, window); ctx and window are None when the history database is unusable and the
    user chose to quit.
    """
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    from llm_tuner.qt.context import AppContext
    from llm_tuner.qt.probes import start_probes
    from llm_tuner.services.settings_store import (
        DataFolderUnusable,
        database_path,
        default_database_path,
        load_settings,
    )
    from llm_tuner.ui.main_window import MainWindow

    QCoreApplication.setOrganizationName("llm-tuner")
    QCoreApplication.setApplicationName("llm-tuner")
    QCoreApplication.setApplicationVersion(__version__)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setStyle("Fusion")  # consistent widgets; follows the system's light or dark colour scheme
    app.setDesktopFileName("io.github.llm_tuner.LlmTuner")
    if not hasattr(app, "_llm_tuner_gc"):  # cycles freed on the GUI thread only (see qt/gui_gc.py)
        from llm_tuner.qt.gui_gc import GuiThreadCollector
        from llm_tuner.qt.heap import steady_heap

        # the window is built by then
        app._llm_tuner_gc = GuiThreadCollector(parent=app, freeze_after_ms=10_000)
        steady_heap()  # paint buffers out of the main heap: RSS that does not step up at each tab switch
    icon = Path(__file__).resolve().parent / "data" / "icons" / "llm-tuner.svg"  # shipped in the package
    if icon.is_file():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon)))
    settings = load_settings()
    try:
        db_path, unusable = database_path(settings.data_dir), None
    except DataFolderUnusable as exc:  # an unmounted drive: the app starts on its own folder and says so
        log.error("%s", exc)
        db_path, unusable = default_database_path(), exc
    engine = _open_history(db_path, smoke_test)
    if engine is None:
        return app, None, None
    ctx = AppContext(settings=settings, engine=engine)
    window = MainWindow(ctx)
    _say_settings_set_aside()
    if unusable is not None:
        from llm_tuner.qt.errors import report_failure

        report_failure("Opening the data folder", unusable.with_traceback(None),  # a setting, not a bug
                       advice=f"This session's history is kept in the app's own folder, {db_path.parent}. "
                              "Connect the drive that holds it and restart, or choose another folder in "
                              "File ▸ Settings.")
    start_probes(ctx)
    return app, ctx, window


def _say_settings_set_aside() -> None:
    """A settings file found unreadable at this start (kept aside by settings_store) is said in the status bar
    and the Errors list: the model folders, binary path and trusted binaries are the defaults now."""
    from llm_tuner.qt.errors import report_failure
    from llm_tuner.services.settings_store import take_set_aside

    for exc in take_set_aside():
        report_failure("Reading the settings", exc,
                       advice="Set the model folders and llama-server again in File ▸ Settings, or mend the "
                              "kept file and put it back as settings.json while the app is closed")


def install_excepthook() -> None:
    """Every exception nobody caught, on the GUI thread (`sys.excepthook`) or another
    (`threading.excepthook`), goes to the app's one error surface (qt.errors): logged once, said in the status
    bar, kept in the Errors list. Under --smoke-test nobody reads a status bar: it goes to stderr and the
    process ends with code 3."""
    from llm_tuner.qt.errors import install_hooks

    install_hooks(fatal=bool(os.environ.get("LLM_TUNER_SMOKE_TEST")))


def run_gui(smoke_test: bool = False) -> int:
    setup_logging()
    if smoke_test:
        os.environ["LLM_TUNER_SMOKE_TEST"] = "1"
    install_excepthook()
    from PySide6.QtCore import QTimer

    app, _ctx, window = build_window(smoke_test)
    if window is None:
        return DATABASE_EXIT
    window.show()
    if smoke_test:
        QTimer.singleShot(3000, app.quit)
    code = app.exec()
    return code or (_smoke_check_data() if smoke_test else 0)


def _check_file_modes_for_cli() -> None:
    """The CLI does not keep the app log open: its notes about file modes are appended there once."""
    root = logging.getLogger()
    if any(getattr(h, "_llm_tuner", False) for h in root.handlers):
        return check_file_modes()
    level = root.level
    try:
        setup_logging()  # runs check_file_modes with the log open
    except OSError:
        return None
    finally:
        for h in [h for h in root.handlers if getattr(h, "_llm_tuner", False)]:
            root.removeHandler(h)
            try:
                h.close()
            # the last lines did not fit (a full disk): the command goes on and says what is wrong
            except OSError:
                pass
        root.setLevel(level)
    return None


def _smoke_check_data() -> int:
    """--smoke-test also checks the data a bundle must carry (prompt texts, the default flag catalog)."""
    from llm_tuner.services.bench import prompt_texts, prompts_dir
    from llm_tuner.services.binaries import default_catalog

    try:
        n_texts, n_flags = len(prompt_texts()), len(default_catalog().flags)
    except Exception as exc:  # noqa: BLE001 - reported, then a non-zero exit
        print(f"smoke test: shipped data missing: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 3
    print(f"smoke test: ok ({n_texts} prompt texts in {prompts_dir()}, "
          f"{n_flags} flags in the default catalog)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if _is_cli(argv):
        from llm_tuner.cli import main as cli_main

        _check_file_modes_for_cli()
        from llm_tuner.services.settings_store import take_set_aside

        for exc in take_set_aside():  # the window says it in its status bar; a command, on stderr
            print(f"llm-tuner: warning: {exc}", file=sys.stderr)
        return cli_main(argv)
    smoke = "--smoke-test" in argv
    return run_gui(smoke_test=smoke)
