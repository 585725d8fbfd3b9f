"""The Profile panel's named profiles: save, new, duplicate, rename, delete, revert, and the names and
versions lists (ProfilePanel mixes this in). Widgets and dialogs only: the lists, the rules and every store
call are state.profile_library.ProfileLibraryState's, whose store calls run here on one worker thread of
the panel's own (calls keep their order)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog, QListWidgetItem, QMessageBox

from llm_tuner.core.cmdline import effective_profile
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.store.profiles import ProfileNameError


class ProfileLibrary:
    """Named profiles and their versions for ProfilePanel (its widgets, repo and state are the panel's)."""

    def _ask_name(self, title: str, default: str = "") -> str | None:
        name, ok = QInputDialog.getText(self, title, "Profile name:", text=default)
        return name.strip() if ok and name.strip() else None

    def _warn(self, exc: Exception) -> None:
        QMessageBox.warning(self, "Profile", f"{exc}. Choose another name.")

    def unique_name(self, base: str) -> str:
        """`base`, or `base 2`, `base 3`... whichever no listed profile uses (no SQL: the loaded list)."""
        return self.library.unique_name(base)

    # -- the store, off the GUI thread -------------------------------------------------------------
    @property
    def store_busy(self) -> bool:
        """True while a store call is queued or running (tests wait on `store_settled`)."""
        return self.library.store_busy

    def _store_run(self, work, done, failed) -> None:
        """The library's store calls: one worker thread of the panel's own, so calls keep their order."""
        job = BackgroundJob(lambda _ctl: work(), self, what=self.library.jobs.doing, on_failed=failed)
        job.succeeded.connect(done)
        job.start(self._store_pool)

    def _on_library_changed(self, what: str, *details) -> None:
        if what == "names":
            self._show_names(details[0])
        elif what == "versions":
            self._fill_versions(details[0])
        elif what == "open":
            self.set_profile(*details)
        elif what == "recompute":
            self._recompute(publish=details[0])
        elif what == "loaded":
            self.migrate_banner.check(details[0])  # saved with another build? (profile_migrate.py)
        elif what == "refused":
            self._warn(details[0])
        elif what == "failed":
            self._on_store_failed(*details)
        elif what == "settled":
            self.store_settled.emit()

    def _on_store_failed(self, what: str, exc: object) -> None:
        if isinstance(exc, ProfileNameError):
            self._warn(exc)
        else:
            QMessageBox.warning(self, "Profile", f"Could not {what}: {exc}. The profile database may be busy "
                                "(another llm-tuner writing to it); try again.")

    # -- actions on the store ----------------------------------------------------------------------
    def _on_save_clicked(self) -> None:
        model = effective_profile(self.profile).model
        # named after its model, as the quick start does
        suggestion = Path(model).stem if model else "profile"
        name = self.current_name or self._ask_name("Save profile", self.unique_name(suggestion))
        if name:
            self.save_as(name)

    def save_as(self, name: str) -> None:
        """Save the editor's settings as the newest version of `name` (the store call runs in the
        background)."""
        self.library.save_as(name)

    def _on_state_save_profile_requested(self) -> None:
        """Save under the profile's name; an unsaved one is named after its model (the quick start)."""
        if not self.profile.model:
            self.ctx.state.workspace.post_status("Pick a model first: a profile is saved for a model.")
            return
        self.save_as(self.current_name or self.unique_name(Path(self.profile.model).stem))

    def _on_state_profile_variant_requested(self, suffix: str, changes: dict) -> None:
        """Duplicate the saved profile as "<name> <suffix>" with `changes` to its fields, and save that."""
        if self.current_name is None:
            self.ctx.state.workspace.post_status("Save the profile first, then duplicate it.")
            return
        self.duplicate(self.unique_name(f"{self.current_name} {suffix}"))
        self.set_profile(self.profile.model_copy(update=changes), self.current_name)
        self.save_as(self.current_name)

    def _on_new_clicked(self) -> None:
        name = self._ask_name("New profile", self.unique_name("profile"))
        if name:
            self.new_profile(name)

    def new_profile(self, name: str) -> None:
        self.library.new_profile(name)

    def _on_duplicate_clicked(self) -> None:
        if self.current_name:
            name = self._ask_name("Duplicate profile", self.unique_name(self.current_name + " copy"))
            if name:
                self.duplicate(name)

    def duplicate(self, new: str) -> None:
        """A new profile whose first version is the current one's saved settings (or the editor's,
        unsaved)."""
        self.library.duplicate(new)

    def _on_rename_clicked(self) -> None:
        if self.current_name:
            name = self._ask_name("Rename profile", self.current_name)
            if name:
                self.rename(name)

    def rename(self, new: str) -> None:
        self.library.rename(new)

    def _on_delete_clicked(self) -> None:
        if not self.current_name:
            return
        answer = QMessageBox.question(self, "Delete profile", f"Delete “{self.current_name}”? Benchmark runs "
                                      "keep the settings they ran with.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_current()

    def delete_current(self) -> None:
        self.library.delete_current()

    def _on_revert_clicked(self) -> None:
        item = self.versions_list.currentItem()
        if item is not None and self.current_name:
            self.revert_to(int(item.data(Qt.ItemDataRole.UserRole)))

    def revert_to(self, version: int) -> None:
        """Save version `version`'s settings as the newest version; the editor shows them at once."""
        self.library.revert_to(version)

    # -- lists ------------------------------------------------------------------------------------
    def _show_names(self, name: str | None) -> None:
        """The names list as the library has it, `name` selected (without loading it)."""
        names = self.library.names
        self.names_list.blockSignals(True)
        self.names_list.clear()
        self.names_list.addItems(names)
        for i, n in enumerate(names):
            self.names_list.item(i).setToolTip(n)  # a long name is clipped in the narrow list
        self.names_list.setCurrentRow(names.index(name) if name is not None else -1)
        self.names_list.blockSignals(False)
        self.empty_hint.setVisible(not names)

    def reload_names(self, select: str | None = None) -> None:
        """Read the names from the store (background); select `select` without reloading its settings."""
        self.library.reload_names(select)

    def _on_names_current_changed(self, name: str) -> None:
        """The user picked a profile: load its newest version and its history (background)."""
        self.library.load(name)

    def _on_load_job_succeeded(self, result) -> None:
        """A profile and its versions (a migration saved a new version): shown unless another was picked."""
        self.library.loaded(result)

    def _fill_versions(self, versions) -> None:
        self.versions_list.clear()
        for v in versions:
            item = QListWidgetItem(f"v{v.version}  {v.created_at:%Y-%m-%d %H:%M}  {v.note}")
            item.setToolTip(f"Version {v.version}, saved "
                            f"{v.created_at:%Y-%m-%d %H:%M}" + (f": {v.note}" if v.note else ""))
            item.setData(Qt.ItemDataRole.UserRole, v.version)
            self.versions_list.addItem(item)
        self.revert_button.setEnabled(self.versions_list.count() > 1)
