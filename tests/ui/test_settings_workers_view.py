"""Settings' RPC workers box binds WorkersState (issue 36), without a server: a bad address said in red, a
worker added and removed, the check of a real closed port in the table, the bind warning; the dialog's
settings as the form makes them."""

from __future__ import annotations

from llm_tuner.core.settings import RpcWorker, Settings


def test_the_workers_box_shows_its_state(qtbot):
    from llm_tuner.ui.dialogs.workers_box import WorkersBox

    box = WorkersBox(Settings(rpc_workers=[RpcWorker(endpoint="127.0.0.1:1")]))
    qtbot.addWidget(box)
    box.show()
    assert box.table.rowCount() == 1 and box.table.item(0, 2).text() == "not checked"
    assert not box.start_button.isEnabled()  # no pool: no local worker from here
    box.endpoint_edit.setText("nowhere")
    box.add_button.click()
    assert "is not a worker address" in box.message.text() and "c62828" in box.message.styleSheet()
    assert box.endpoint_edit.text() == "nowhere"  # kept to correct
    box.endpoint_edit.setText("10.0.0.9:50052")
    box.token_edit.setText("s3cret")
    box.add_button.click()
    assert box.endpoints() == ["127.0.0.1:1", "10.0.0.9:50052"] and box.endpoint_edit.text() == ""
    assert box.workers()[1].agent_token == "s3cret" and box.message.text() == ""
    box.table.selectRow(1)
    box.remove_button.click()
    assert box.endpoints() == ["127.0.0.1:1"]
    box.check()
    qtbot.waitUntil(lambda: box.check_button.isEnabled(), timeout=15_000)
    assert box.table.item(0, 2).text().startswith("connection refused")
    box.bind_edit.setText("0.0.0.0")
    assert "Never expose the RPC server to an open network" in box.message.text()


def test_the_dialogs_settings_are_the_forms(qtbot):
    from llm_tuner.ui.dialogs.settings_dialog import SettingsDialog

    original = Settings(model_folders=["/models"], llama_server_path="/opt/llama/llama-server",
                        rpc_workers=[RpcWorker(endpoint="10.0.0.2:50052")], future_option="kept")
    dialog = SettingsDialog(original)
    qtbot.addWidget(dialog)
    assert dialog.result_settings() == original
    dialog.server_path.edit.setText("  ")
    dialog.data_dir.setText(" /data ")
    edited = dialog.result_settings()
    assert edited.llama_server_path is None and edited.data_dir == "/data"
    assert edited.model_dump()["future_option"] == "kept"
