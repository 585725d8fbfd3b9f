"""The workspace without Qt (issue 36): declared, typed properties that say each change once, the edited
profile's publication (a rename is a change), and the requests one view makes of another."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core.advice import Advice
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.state.callbacks import Declared, Observable, declared
from llm_tuner.state.live import LiveFleet
from llm_tuner.state.workspace import REQUESTS, Workspace


class Heard:
    def __init__(self, model: Observable) -> None:
        self.events: list[tuple] = []
        model.add_callback(lambda *event: self.events.append(event))

    def topics(self) -> list[str]:
        return [e[0] for e in self.events]


def test_each_property_says_a_change_once_and_an_equal_value_not_at_all():
    ws = Workspace()
    heard = Heard(ws)
    inventory = DeviceInventory(host=HostInfo(memory_total_mib=65536))
    ws.inventory = inventory
    ws.inventory = DeviceInventory(host=HostInfo(memory_total_mib=65536))  # equal: nothing to say
    ws.model_path = Path("/models/a.gguf")
    ws.model_path = Path("/models/a.gguf")
    ws.model_path = None
    ws.settings = Settings(model_folders=["/models"])
    ws.profile_errors = []  # the default already
    assert heard.events == [("inventory", inventory), ("model", Path("/models/a.gguf")), ("model", None),
                            ("settings", Settings(model_folders=["/models"]))]
    assert ws.inventory is inventory and ws.model_path is None


def test_a_mutable_default_is_each_workspaces_own():
    a, b = Workspace(), Workspace()
    a.binaries["llama-server"] = None  # type: ignore[assignment]
    assert b.binaries == {} and a.settings is not b.settings
    assert set(declared(Workspace)) == {"binaries", "inventory", "settings", "model_path", "profile", "profile_name",
                                        "profile_problem", "profile_errors", "profile_store_busy", "profile_names",
                                        "complete_runs", "compared"}


def test_a_state_class_declares_its_own_properties():
    class Box(Observable):
        size = Declared[int](0, topic="size")
        names = Declared[list[str]](topic="names", factory=list)

    box = Box()
    heard = Heard(box)
    box.size = 3
    box.size = 3
    box.names = ["a"]
    assert heard.events == [("size", 3), ("names", ["a"])] and Box().names == []
    assert isinstance(Box.size, Declared)


def test_publishing_the_edited_profile_says_a_rename_too():
    """The views label runs and servers by the profile's name: a rename with the same settings is said as
    "profile" (Tune's base, Live's titles follow); the same profile and name again say nothing."""
    ws = Workspace()
    heard = Heard(ws)
    p = LaunchProfile(model="/m.gguf", ctx_size=4096)
    ws.publish_profile(p, "gemma")
    assert heard.topics() == ["profile_meta", "profile"] and ws.profile is p and ws.profile_name == "gemma"
    heard.events.clear()
    ws.publish_profile(p, "gemma")
    ws.publish_profile(LaunchProfile(model="/m.gguf", ctx_size=4096), "gemma")  # equal settings
    assert heard.events == []
    ws.publish_profile(p, "gemma fast")
    assert heard.topics() == ["profile_meta", "profile"]
    heard.events.clear()
    ws.publish_profile(LaunchProfile(model="/m.gguf", ctx_size=8192), "gemma fast")
    assert heard.topics() == ["profile"]


def test_the_checks_that_stop_a_launch_are_said_when_they_change():
    ws = Workspace()
    heard = Heard(ws)
    error = Advice(id="no-model", severity="error", message="no model", reason="r", source="s")
    ws.publish_checks("Fix context first", [error])
    ws.publish_checks("Fix context first", [error])
    ws.publish_checks(None, [])
    assert heard.topics() == ["profile_meta", "profile_meta", "profile_meta", "profile_meta"]
    assert ws.profile_problem is None and ws.profile_errors == []


def test_requests_and_events_between_views():
    ws = Workspace()
    heard = Heard(ws)
    ws.request_launch()
    ws.request_new_server()
    ws.request_benchmark()
    ws.request_compare(3, 7)
    ws.post_status("Saved gemma version 2.")
    ws.runs_changed()
    assert heard.events == [("launch_requested",), ("new_server_requested",), ("benchmark_requested",),
                            ("compare", 3, 7), ("status_message", "Saved gemma version 2."), ("bench_runs",)]
    assert set(REQUESTS) >= {"launch_requested", "stop_requested", "copy_command_requested"}
    with pytest.raises(ValueError, match="not a request"):
        ws.request("format_disk")


def test_the_quick_start_reads_and_asks_through_the_workspace():
    """What the quick start ticks (saved profiles, complete runs, a comparison shown) is published here once
    per change; its steps are requests with what the owning view needs (a model's path, a variant's fields)."""
    ws = Workspace()
    heard = Heard(ws)
    ws.profile_names = ("gemma",)
    ws.profile_names = ("gemma",)
    ws.complete_runs = ((4, "gemma ub256"), (2, "gemma"))
    ws.compared = (2, 4)
    ws.request_select_model(Path("/models/demo.gguf"))
    ws.request_save_profile()
    ws.request_compare_newest()
    changes = {"ubatch_size": 256}
    ws.request_profile_variant("ub256", changes)
    changes["ubatch_size"] = 1  # the request carries its own copy
    assert heard.events == [("profile_names", ("gemma",)), ("complete_runs", ((4, "gemma ub256"), (2, "gemma"))),
                            ("compared", (2, 4)), ("select_model_requested", Path("/models/demo.gguf")),
                            ("save_profile_requested",), ("compare_newest_requested",),
                            ("profile_variant_requested", "ub256", {"ubatch_size": 256})]


def test_the_shown_server_is_said_on_every_publication():
    """A slot changes in place (its state, URL, router models): each publication is said, with the slot."""
    ws, fleet = Workspace(), LiveFleet()
    heard = Heard(ws)
    slot = fleet.selected
    ws.show_server(slot, "sk-1", fleet.slots)
    ws.show_server(slot, "sk-1", fleet.slots)
    assert heard.events == [("server", slot), ("server", slot)]
    assert ws.server is slot and ws.server_api_key == "sk-1" and ws.servers == (slot,)
