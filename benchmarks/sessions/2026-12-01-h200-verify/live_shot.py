"""On the lent H200 (CUDA+Vulkan build): the app's Live tab running `-dev CUDA0,Vulkan0 -ts 40,60 -ngl 99`, as a
user would start it (Profile fields, then Live → Start, test prompts); saves the Devices view and what the panel
shows: one set of plots for the one card, its curves' names, and its memory stacks.
Usage: QT_QPA_PLATFORM=offscreen python3 live_shot.py OUTDIR
"""

import sys
import time
from pathlib import Path

from llm_tuner.app import build_window
from llm_tuner.ui.screenshots import _grab, _settle, _wait_until

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
app, ctx, window = build_window()
window.resize(1600, 1000)
window.show()
_wait_until(lambda: ctx.state.inventory is not None, 90)
inv = ctx.state.inventory
print("inventory:", [(g.name, g.llama_names, g.pci_bus_id, getattr(g, "guessed_names", ())) for g in inv.devices])
qs = window.quick_start
qs.buttons["model"].click()
_settle(1.0)
profile = window.profile_panel
for field, value in (("threads", "4"), ("ctx_size", "8192"), ("gpu_layers", "99"), ("devices", "CUDA0,Vulkan0"),
                     ("tensor_split", "40,60")):
    profile.editors[field].widget.setText(value)
profile._on_field_edited()
qs.buttons["profile"].click()
_settle(1.0)
window.tabs.setCurrentWidget(window.plan_panel)
_settle(4.0)
_grab(window, out / "plan-cuda0-vulkan0.png")
live = window.live_panel
window.tabs.setCurrentWidget(live)
live.start()
print("ready:", _wait_until(live.is_ready, 120))
t0 = time.monotonic()
while time.monotonic() - t0 < 12:
    live.send_test_prompt()
    _wait_until(lambda: live.test_button.isEnabled(), 60)
live.tabs.setCurrentIndex(0)
_settle(4.0)
_grab(window, out / "live-cuda0-vulkan0.png")
dp = live.device_plots
print("plot curves (plot, ring):", sorted(dp.curves))
print("legend names:", dp.device_labels)
print("memory stacks:", [(m.device, [(k, round(v)) for k, v in m.stacked()]) for m in live.memory_bars.last])
live.stop_server()
_wait_until(lambda: not live.slot.running, 30)
window.close()
