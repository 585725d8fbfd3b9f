"""AppContext: what the composition root hands every panel (services, store, shared state)."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal
from sqlalchemy import Engine

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.settings import Settings
from llm_tuner.services.binaries import BinaryInfo
from llm_tuner.services.rpc import WorkerPool


class AppState(QObject):
    """Shared selection and facts that several panels react to. Signals are past tense."""

    binaries_probed = Signal(object)  # dict[str, BinaryInfo]
    inventory_detected = Signal(object)  # DeviceInventory
    model_selected = Signal(object)  # pathlib.Path | None
    profile_changed = Signal(object)  # LaunchProfile (the one being edited)
    settings_changed = Signal(object)  # Settings
    status_message_posted = Signal(str)
    bench_runs_changed = Signal()  # a benchmark run was stored, finished or deleted
    compare_requested = Signal(int, int)  # run ids A, B (History -> Compare)
    # a saved profile's name and a llama-server: re-tune it as the base, run by that build (Compare -> Tune)
    tune_requested = Signal(str, str)

    def __init__(self) -> None:
        super().__init__()
        self.binaries: dict[str, BinaryInfo] = {}
        self.inventory: DeviceInventory | None = None
        self.model_path = None
        self.profile = None
        self.profile_name: str | None = None  # saved name of the edited profile (None = unsaved)
        self.profile_problem: str | None = None  # why the edited profile must not run now (an invalid field)
        # the edited profile's advice errors (core.advice.Advice): launch refuses
        self.profile_errors: list = []

    def set_binaries(self, binaries: dict[str, BinaryInfo]) -> None:
        self.binaries = binaries
        self.binaries_probed.emit(binaries)

    def set_inventory(self, inventory: DeviceInventory) -> None:
        self.inventory = inventory
        self.inventory_detected.emit(inventory)

    def select_model(self, path) -> None:
        self.model_path = path
        self.model_selected.emit(path)

    def set_profile(self, profile) -> None:
        self.profile = profile
        self.profile_changed.emit(profile)


@dataclass
class AppContext:
    settings: Settings
    engine: Engine
    state: AppState = field(default_factory=AppState)
    # local RPC workers this app started (stopped at quit)
    workers: WorkerPool = field(default_factory=WorkerPool)
    probe_generation: int = 0  # the newest binaries probe (qt.probes): only it publishes
