"""About dialog: versions of the app, Qt, and the llama.cpp binaries in use."""

from __future__ import annotations

import platform
import sys

import pyqtgraph
import PySide6
from PySide6.QtCore import qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from llm_tuner import __version__
from llm_tuner.services.binaries import BinaryInfo


def version_lines(binaries: dict[str, BinaryInfo]) -> list[tuple[str, str]]:
    rows = [
        ("llm-tuner", __version__),
        ("Python", sys.version.split()[0]),
        ("Qt / PySide6", f"{qVersion()} / {PySide6.__version__}"),
        ("pyqtgraph", pyqtgraph.__version__),
        ("Platform", platform.platform()),
    ]
    for kind, info in binaries.items():
        if info.ok:
            backends = ", ".join(info.backends)
            build = f"build {info.build} · " if info.build else ""
            version = f"{info.version or '?'} ({info.commit or '?'})"
            rows.append((kind, f"{build}{version} · {backends} · {info.path}"))
        else:
            rows.append((kind, info.error or "not found"))
    return rows


class AboutDialog(QDialog):
    def __init__(self, binaries: dict[str, BinaryInfo], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About llm-tuner")
        layout = QVBoxLayout(self)
        rows = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in version_lines(binaries))
        text = QLabel(
            "<h2>llm-tuner</h2><p>Tune llama.cpp's llama-server for your GPUs: profiles, memory plans, "
            f"live telemetry, benchmarks and A/B comparisons.</p><table cellspacing='6'>{rows}</table>"
        )
        text.setWordWrap(True)
        layout.addWidget(text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
