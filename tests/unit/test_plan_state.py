"""PlanState without Qt: a profile in, the plan out; each control, the solver's answer and the -ot rules as
changes to the profile being edited; devices planned by hand; the calibration a llama.cpp check teaches.
Real GGUF files (tests/support/random_gguf, the demo model), real profiles, the recorded -lv 4 log."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core import flags
from llm_tuner.core.devices import DeviceInventory, HostInfo, LlamaDevice
from llm_tuner.core.memory import args_from_profile, plan_memory
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.state.callbacks import declared
from llm_tuner.state.plan import NO_MODEL, PlanState
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe

DATA = Path(__file__).parents[1] / "data"
HOST = HostInfo(memory_total_mib=65536, memory_available_mib=60000, cpu_flags=("avx", "avx2", "fma", "f16c"))
ONE_GPU = DeviceInventory(host=HOST, llama_devices=(LlamaDevice(name="CUDA0", description="RTX 4090 Laptop",
                                                                memory_total_mib=16384, memory_free_mib=15000),))


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    """One dense model for the module (writing it is most of a test's time); the tests only read it."""
    return write_qwen3_dense(tmp_path_factory.mktemp("plan_state") / "dense.gguf", n_layer=8, n_embd=512, n_ff=1536, n_head=8, n_head_kv=2,
                             head_dim=64, n_ctx_train=32768, weight_type="Q4_0")


class Published:
    """What the panel does with a "profile" event: publish it (here: keep them, and hand each back to the state
    as AppState's profile_changed would, to show the echo is ignored)."""

    def __init__(self, state: PlanState) -> None:
        self.state, self.profiles = state, []
        state.add_callback(self)

    def __call__(self, what: str, *details) -> None:
        if what == "profile":
            self.profiles.append(details[0])
            self.state.use_profile(details[0])  # the signal comes straight back while the state writes


def _state(inventory: DeviceInventory | None = ONE_GPU) -> PlanState:
    return PlanState(inventory=lambda: inventory)


def test_a_profile_in_gives_its_model_args_and_plan(dense):
    state = _state()
    events: list[str] = []
    state.add_callback(lambda what, *d: events.append(what))
    assert state.recompute() is None and state.model_line() == NO_MODEL
    state.use_profile(LaunchProfile(model=str(dense), ctx_size=8192, cache_type_k="q8_0", flash_attn="on"))
    assert state.model is not None and str(state.model.path) == str(dense)  # read at once by run_now
    assert state.args.ctx == 8192 and state.args.cache_type_k == "q8_0"
    assert {"args", "note", "model", "inputs"} <= set(events)
    plan = state.recompute()
    assert plan.n_ctx == 8192 and [d.name for d in plan.devices] == ["CUDA0", "Host"]
    assert state.summary().startswith("n_ctx 8192") and "Fits." in state.summary()
    assert state.model_line().startswith("<b>") and "8 blocks" in state.model_line()


def test_a_control_writes_only_its_flag_into_the_profile(dense):
    state = _state()
    published = Published(state)
    state.use_profile(LaunchProfile(model=str(dense), ctx_size=8192))
    state.set_value("ctk", "q8_0")
    assert published.profiles[-1].cache_type_k == "q8_0" and published.profiles[-1].ctx_size == 8192
    assert state.profile is published.profiles[-1] and state.args.cache_type_k == "q8_0"
    state.set_value("ctx", 0)  # "trained context (-c 0)": no flag at all
    assert state.profile.ctx_size is None and state.args.ctx == 0
    state.set_value("ub", "512")  # llama-server's default: written as no flag
    state.set_value("np", 0)
    state.set_value("fa", "on")
    p = state.profile
    assert (p.ubatch_size, p.parallel, p.flash_attn, p.cache_type_k) == (None, None, "on", "q8_0")
    assert state.recompute().n_ctx == 32768  # the trained context
    state.set_margin(2048)
    assert state.profile.fit_target_mib == (2048,) and state.margin_mib == 2048
    state.set_margin(1024)
    assert state.profile.fit_target_mib == () and state.margin_mib == 1024  # the default: no -fitt
    with pytest.raises(ValueError, match="no Plan control"):
        state.set_value("nope", 1)


def test_without_a_profile_the_controls_change_the_plan_only(dense):
    state = _state()
    published = Published(state)
    state.select_model(dense)
    state.set_value("ctx", 4096)
    assert state.recompute().n_ctx == 4096 and published.profiles == [] and state.profile is None


def test_the_solvers_answer_is_applied_to_args_and_profile(dense):
    state = _state()
    state.use_profile(LaunchProfile(model=str(dense), ctx_size=4096))
    state.recompute()
    answer = state.solve("context")
    assert "largest context" in answer
    assert state.args.ctx == state.profile.ctx_size and state.profile.ctx_size > 4096
    plan = state.recompute()
    assert plan.n_ctx == state.profile.ctx_size and plan.fits
    # what the profile now says plans the same (the answer is in the profile, not only in the view)
    again = plan_memory(state.model, args_from_profile(state.profile), state.gpus(), state.host(),
                        cpu_flags=state.cpu_flags())
    assert again.device("CUDA0").total_mib == pytest.approx(plan.device("CUDA0").total_mib)


def test_the_moe_layers_answer_writes_the_whole_placement(tmp_path):
    path = write_qwen3_moe(tmp_path / "moe.gguf", n_layer=8, n_embd=256, n_ff_exp=512, n_expert=16, n_ctx_train=4096)
    state = _state(DeviceInventory(host=HOST))
    state.use_profile(LaunchProfile(model=str(path), ctx_size=4096, threads=2))
    state.add_planned_device("CUDA0", "CUDA", 1285)  # room for the layers and the experts of 4 of 8 blocks
    state.set_margin(0)
    assert "--n-cpu-moe 4" in state.solve("layers")
    p = state.profile
    assert p.gpu_layers == 9 and p.n_cpu_moe == 4 and not p.override_tensor
    written = plan_memory(state.model, args_from_profile(p), state.gpus(), state.host(), apply_fit=False)
    assert written.fits


def test_no_model_no_answer():
    state = _state()
    assert state.solve("context") == "Select a model first."


def test_override_rules_go_into_the_profile_as_it_keeps_them(dense):
    state = _state()
    state.use_profile(LaunchProfile(model=str(dense), ctx_size=4096))
    events: list[str] = []
    state.add_callback(lambda what, *d: events.append(what))
    state.set_overrides(((r"blk\.(0|6)\.ffn_.*", "CPU"),))
    assert [str(r) for r in state.profile.override_tensor] == [r"blk\.(0|6)\.ffn_.*=CPU"]
    assert "overrides" in events and state.args.overrides == ((r"blk\.(0|6)\.ffn_.*", "CPU"),)
    state.set_overrides(())
    assert state.profile.override_tensor == () and not state.profile.cpu_moe


def test_devices_of_unknown_size_get_no_verdict_until_planned(dense):
    state = _state()
    state.use_profile(LaunchProfile(model=str(dense), ctx_size=4096, devices=("CUDA0", "Vulkan1")))
    state.recompute()
    assert state.unknown_devices() == ["Vulkan1"]
    assert state.verdict().startswith("No fit verdict: the size of Vulkan1 is unknown")
    state.plan_unknown_devices(24576)
    plan = state.recompute()
    assert state.unknown_devices() == [] and plan.fits is not None and state.verdict() in ("Fits.", "Does NOT fit.")
    assert "Vulkan1 (24.00 GiB, planned)" in state.devices_line()
    assert state.split()[0] == ["CUDA0", "Vulkan1"]


def test_planned_devices_are_named_as_llama_cpp_would_and_the_split_is_whole_layers(dense):
    state = _state()
    state.select_model(dense)
    assert state.next_device_name("CUDA") == "CUDA1" and state.next_device_name("Metal") == "MTL0"
    state.add_planned_device(state.next_device_name("Vulkan"), "Vulkan", 24576)
    state.recompute()
    names, shares = state.split()
    assert names == ["CUDA0", "Vulkan0"] and sum(shares) > 0
    state.set_split([6.4, 2.6])
    assert state.args.tensor_split == (6.0, 3.0)
    assert state.recompute().device("CUDA0").layers > state.recompute().device("Vulkan0").layers
    state.clear_planned()
    assert [d.name for d in state.recompute().devices] == ["CUDA0", "Host"] and state.split() is None


def test_a_missing_or_unreadable_model_gives_no_plan_and_says_why(dense, tmp_path):
    state = _state()
    state.use_profile(LaunchProfile(model=str(dense)))
    assert state.recompute() is not None
    missing = tmp_path / "typo.gguf"
    state.use_profile(LaunchProfile(model=str(missing)))
    assert state.model is None and state.recompute() is None and state.summary() == ""
    assert f"{missing} does not exist" in state.model_line()
    junk = tmp_path / "notes.gguf"
    junk.write_text("my shopping list")
    state.select_model(junk)
    assert state.model is None and state.model_line().startswith("notes.gguf: ")
    assert state.model_line().endswith("Choose another file.")


def test_what_the_view_shows_is_declared_and_said_once_per_change(dense, tmp_path):
    """The declared form (issue 36, as LiveFleet): each property says its topic once when it changes and not at
    all for an equal value; `args` and `profile` stay plain (a control's own change and an incoming profile are
    not said back)."""
    assert set(declared(PlanState)) == {"model", "no_model_reason", "note", "args_error", "draft_model", "draft_error", "planned",
                                        "rpc_devices", "rpc_error", "calibrations"}
    state = _state()
    events: list[str] = []
    state.add_callback(lambda what, *d: events.append(what))
    state.add_planned_device("Vulkan1", "Vulkan", 8192)
    state.add_planned_device("Vulkan1", "Vulkan", 8192)  # the same device again: nothing changed
    assert events == ["inputs"] and [d.name for d in state.planned] == ["Vulkan1"]
    state.clear_planned()
    state.clear_planned()
    assert events == ["inputs", "inputs"] and state.planned == ()
    events.clear()
    state.read_rpc_devices(())  # the same (no) workers: nothing to read or say
    state.select_model(None)  # no model before either: only the plan's inputs are said
    assert events == ["inputs"]
    events.clear()
    state.use_profile(LaunchProfile(model=str(tmp_path / "typo.gguf")))
    assert events.count("model") == 1 and "profile" not in events  # the reason; an incoming profile not said back
    events.clear()
    state.select_model(dense)
    assert events.count("model") == 2 and events.count("note") == 2  # model, reason cleared; reading…, cleared
    assert state.model is not None and state.note is None and state.no_model_reason is None
    events.clear()
    state.set_model(state.model)  # the same model: only the inputs
    assert events == ["inputs"]


def test_a_llama_cpp_check_calibrates_this_models_compute(demo_model):
    # tests/data/memory/README.md: the recorded run is `llama-server -m <demo> -fit off -t 2 -lv 4` on this CPU
    state = _state(DeviceInventory(host=HOST))
    state.select_model(demo_model)
    state.recompute()
    assert state.calibration(str(demo_model)) is None
    rows = state.learn_from_check((DATA / "memory" / "llama-server-lv4-demo.log").read_text())
    measured = {(r.device, r.label): r.measured_mib for r in rows}
    assert measured[("Host", "KV cache")] == 133.5
    assert state.calibration(str(demo_model)) is not None
    assert state.recompute().device("Host").compute_mib == pytest.approx(measured[("Host", "compute")], rel=0.001)
    assert "Compute calibrated from a llama.cpp check" in state.summary()
    argv = state.check_argv()
    assert flags.value_of(argv, "fit") == "off" and flags.value_of(argv, "model") == str(demo_model)


def test_the_pipeline_line_and_the_ot_preview_on_two_planned_devices(dense):
    """Issue 38: "FFN of every 3rd block to CPU" on two planned 16 GiB GPUs previewed only the weights it moved,
    while the plan's compute buffers dropped with pipeline parallelism, with no word why."""
    from llm_tuner.core.memory import preview_rule, rule_ffn_every_nth

    state = _state(DeviceInventory(host=HOST))
    state.use_profile(LaunchProfile(model=str(dense), ctx_size=8192))
    state.add_planned_device("CUDA0", "CUDA", 16384)
    state.add_planned_device("CUDA1", "CUDA", 16384)
    on = state.recompute()
    assert on.pipeline_parallel is True
    line = state.pipeline_line()
    assert line.startswith("Pipeline parallelism: on (2 devices") and "MiB on CUDA0" in line and "4 copies" in line
    rule = rule_ffn_every_nth(3, 0, state.model.n_layer)
    prev = preview_rule(state.model, state.args, rule, state.gpus(), state.cpu_flags())
    assert "turns pipeline parallelism off" in prev.text() and set(prev.pipeline_off_mib) == {"CUDA0", "CUDA1", "Host"}
    pat, buf = rule.rsplit("=", 1)
    state.set_overrides(((pat, buf),))
    off = state.recompute()
    assert off.pipeline_parallel is False
    # the preview's figure is the plan's own change in compute buffers
    for name, change in prev.pipeline_off_mib.items():
        assert off.device(name).compute_mib - on.device(name).compute_mib == pytest.approx(change, abs=0.01)
    line = state.pipeline_line()
    assert line.startswith("Pipeline parallelism: off (a tensor override is set (-ot blk") and "would take" in line
    # a second rule changes nothing more about it
    more = preview_rule(state.model, state.args, r"blk\.1\.ffn_.*=CPU", state.gpus(), state.cpu_flags())
    assert more.moved_off_mib and not more.pipeline_off_mib and "pipeline" not in more.text()
    # -ngl equal to the layer count: off, and the line says how to turn it back on
    state.set_overrides(())
    state.set_value("ngl", state.model.block_count)
    state.recompute()
    assert f"-ngl {state.model.block_count} equals the model's" in state.pipeline_line()
    state.clear_planned()
    state.recompute()
    assert state.pipeline_line() == ""  # one device (the host): nothing to say


def test_a_value_a_control_cannot_show_is_kept_and_said_until_the_user_sets_it():
    """state.plan_controls: a value beyond a box's range or not among a list's choices is noted with its
    reason (the flag as the labels name it), the note under the box lists them, and a control the user
    sets no longer says it."""
    from llm_tuner.state.plan_controls import UnshownValues, beyond_range, control_tip, not_a_choice

    assert beyond_range("-c", 4096, 0, 10_000_000) is None
    assert beyond_range("-ngl", 999, -1, 999, "all") is None  # in range: the number is shown
    assert beyond_range("-ngl", -2, -1, 999, "all") == "-ngl all is not a value this box offers"
    assert beyond_range("-np", 300, 0, 256) == "-np 300 is beyond what this box holds (0 to 256)"
    assert not_a_choice("-ctk", "q8_0", ["f16", "q8_0"]) is None
    assert not_a_choice("-ctk", "turbo3", ["f16", "q8_0"]) == "-ctk turbo3 is not among this list's choices"
    assert control_tip("-np 300 is beyond").endswith(": the profile keeps it; set a value here to replace it")
    values = UnshownValues()
    assert values.text == ""
    values.note("np", beyond_range("-np", 300, 0, 256))
    values.note("ctx", None)
    values.note("ctk", not_a_choice("-ctk", "turbo3", ["f16"]))
    assert list(values.why) == ["np", "ctk"]
    assert values.text.startswith("The profile's -np 300 is beyond what this box holds (0 to 256); -ctk turbo3")
    assert values.user_set("np") and not values.user_set("np") and not values.user_set("ctx")
    values.clear()
    assert values.why == {} and values.text == ""
