"""Find the llama.cpp binaries and detect devices off the GUI thread; results land in AppState."""

from __future__ import annotations

from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.binaries import KINDS, SERVER, probe
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.telemetry.inventory import detect_inventory, inventory_for


def start_probes(ctx: AppContext) -> BackgroundJob:
    """Probe every binary (version, --help catalog, --list-devices) and the GPUs, then publish both.

    Only the newest probe publishes: one started for older settings (the start-up probe still running when the
    user changes the server's path) finishes into nothing instead of overwriting the newer answer."""
    settings = ctx.settings
    ctx.probe_generation += 1
    generation = ctx.probe_generation

    def work(_ctl):
        binaries = {kind: probe(kind, settings, with_build=True) for kind in KINDS}  # the status bar names it
        server = binaries[SERVER]
        if not server.ok:
            return binaries, detect_inventory(None)
        # PCI addresses tell one card under two backends (CUDA0 = Vulkan0): cached from earlier loads, else
        # learned once here with the demo model (a short llama-server run, on this job's thread)
        return binaries, inventory_for(server.path, learn_with=find_demo_model(),
                                       devices=list(server.devices))

    def done(result) -> None:
        if ctx.probe_generation != generation:
            return  # a newer probe is on its way
        binaries, inventory = result
        ctx.state.set_binaries(binaries)
        ctx.state.set_inventory(inventory)

    job = BackgroundJob(work, what="Looking for llama-server and the devices")
    job.succeeded.connect(done)
    return job.start(long=True)  # runs llama.cpp binaries (--help, --list-devices): the long-job pool
