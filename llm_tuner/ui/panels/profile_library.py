"""The Profile panel's named profiles: save, new, duplicate, rename, delete, revert, and the names and
versions lists, every store call off the GUI thread (ProfilePanel mixes this in)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog, QListWidgetItem, QMessageBox

from llm_tuner.core.cmdline import effective_profile
from llm_tuner.core.profile import LaunchProfile, unique_name
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.builds import save_profile
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
        return unique_name(base, self._names)

    # -- the store, off the GUI thread -------------------------------------------------------------
    # Every ProfileRepository call runs on one worker thread of its own (calls keep their order); the
    # panel updates what it already knows at once (the name, the settings) and fills the lists when the
    # store answers. A real WAL SQLite file takes 0.5-10 ms per call on a busy machine
    # (benchmarks/profile_store_latency.py), which the GUI thread must not wait for.
    @property
    def store_busy(self) -> bool:
        """True while a store call is queued or running (tests wait on `store_settled`)."""
        return self._store_pending > 0

    def _store(self, work, on_done=None, *, what: str) -> None:
        self._store_pending += 1
        self.ctx.state.workspace.profile_store_busy = True  # a Run of the Benchmarks tab waits for it
        job = BackgroundJob(lambda _ctl: work(), self, what=what.capitalize(),
                            on_failed=lambda exc, what=what: self._on_store_job_failed(what, exc))
        if on_done is not None:
            job.succeeded.connect(on_done)
        job.finished.connect(self._on_store_job_finished)
        job.start(self._store_pool)

    def _on_store_job_finished(self) -> None:
        self._store_pending -= 1
        if self._store_pending == 0:
            self.ctx.state.workspace.profile_store_busy = False
            self.store_settled.emit()

    def _on_store_job_failed(self, what: str, exc: object) -> None:
        if isinstance(exc, ProfileNameError):
            self._warn(exc)
        else:
            QMessageBox.warning(self, "Profile", f"Could not {what}: {exc}. The profile database may be busy "
                                "(another llm-tuner writing to it); try again.")
        self.reload_names(select=self.current_name)  # show what the store really holds

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
        self._names_edits += 1
        repo, profile = self.repo, self.profile
        self.saved_profile = profile
        self.set_profile(profile, name.strip() or name)  # publishes the name (bench and Live label by it)
        self._show_name(self.current_name)
        settings = self.ctx.settings
        self._store(lambda: save_profile(repo, name, profile, settings=settings), self._on_save_job_succeeded,
                    what=f"save {name!r}")  # with the build it is meant for (services.builds)

    def _on_save_job_succeeded(self, saved) -> None:
        if self.current_name == saved.name:
            self._reload_versions()
        self.ctx.state.workspace.post_status(f"Saved {saved.name} version {saved.version}.")

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
        self._names_edits += 1
        if name in self._names:
            self._warn(ProfileNameError(f"a profile named {name!r} exists already"))
            return
        repo, profile = self.repo, LaunchProfile(model=self.profile.model)

        def work():
            if repo.latest(name) is not None:
                raise ProfileNameError(f"a profile named {name!r} exists already")
            return repo.save(name, profile)

        self.saved_profile = profile
        self.set_profile(profile, name)
        self._show_name(name)
        self._fill_versions([])
        self._store(work, self._on_save_job_succeeded, what=f"create {name!r}")

    def _on_duplicate_clicked(self) -> None:
        if self.current_name:
            name = self._ask_name("Duplicate profile", self.unique_name(self.current_name + " copy"))
            if name:
                self.duplicate(name)

    def duplicate(self, new: str) -> None:
        """A new profile whose first version is the current one's saved settings (or the editor's,
        unsaved)."""
        self._names_edits += 1
        if new in self._names:
            self._warn(ProfileNameError(f"a profile named {new!r} exists already"))
            return
        repo, old, profile = self.repo, self.current_name, self.profile

        def work():
            if old is None or repo.latest(old) is None:
                return repo.save(new, profile)
            return repo.duplicate(old, new)

        shown = self.saved_profile if (old is not None and self.saved_profile is not None) else profile
        self.saved_profile = shown
        self.set_profile(shown, new)
        self._show_name(new)
        self._fill_versions([])
        self._store(work, self._on_save_job_succeeded, what=f"duplicate as {new!r}")

    def _on_rename_clicked(self) -> None:
        if self.current_name:
            name = self._ask_name("Rename profile", self.current_name)
            if name:
                self.rename(name)

    def rename(self, new: str) -> None:
        self._names_edits += 1
        old = self.current_name
        if old is None or new == old:
            return
        if new in self._names:
            self._warn(ProfileNameError(f"a profile named {new!r} exists already"))
            return
        repo = self.repo
        self.current_name = new
        self._names = [new if n == old else n for n in self._names]
        self._show_name(new)
        self._recompute(publish=True)
        self._store(lambda: repo.rename(old, new), lambda _r: self.reload_names(select=new), what=f"rename {old!r}")

    def _on_delete_clicked(self) -> None:
        if not self.current_name:
            return
        answer = QMessageBox.question(self, "Delete profile", f"Delete “{self.current_name}”? Benchmark runs "
                                      "keep the settings they ran with.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_current()

    def delete_current(self) -> None:
        self._names_edits += 1
        name, repo = self.current_name, self.repo
        if name is None:
            return
        self.current_name, self.saved_profile = None, None
        self._names = [n for n in self._names if n != name]
        self._show_name(None)
        self._fill_versions([])
        self._recompute(publish=False)
        self._store(lambda: repo.delete(name), lambda _r: self.reload_names(), what=f"delete {name!r}")

    def _on_revert_clicked(self) -> None:
        item = self.versions_list.currentItem()
        if item is not None and self.current_name:
            self.revert_to(int(item.data(Qt.ItemDataRole.UserRole)))

    def revert_to(self, version: int) -> None:
        """Save version `version`'s settings as the newest version; the editor shows them at once."""
        name, repo = self.current_name, self.repo
        old = self._versions.get(version)
        if name is None:
            return
        if old is not None:
            self.saved_profile = old.profile
            self.set_profile(old.profile, name)
        self._store(lambda: repo.revert(name, version), self._on_revert_job_succeeded, what=f"revert {name!r}")

    def _on_revert_job_succeeded(self, saved) -> None:
        if self.current_name != saved.name:
            return
        if self.profile != saved.profile:  # the version was not listed yet: show what the store saved
            self.saved_profile = saved.profile
            self.set_profile(saved.profile, saved.name)
        self._reload_versions()

    # -- lists ------------------------------------------------------------------------------------
    def _show_name(self, name: str | None) -> None:
        """List `name` (if new) and select it without loading it (the editor already shows it)."""
        if name is not None and name not in self._names:
            self._names = sorted([*self._names, name], key=str.lower)
        self.names_list.blockSignals(True)
        self.names_list.clear()
        self.names_list.addItems(self._names)
        for i, n in enumerate(self._names):
            self.names_list.item(i).setToolTip(n)  # a long name is clipped in the narrow list
        if name is not None and name in self._names:
            self.names_list.setCurrentRow(self._names.index(name))
        else:
            self.names_list.setCurrentRow(-1)
        self.names_list.blockSignals(False)
        self.empty_hint.setVisible(not self._names)
        self.ctx.state.workspace.profile_names = tuple(self._names)

    def reload_names(self, select: str | None = None) -> None:
        """Read the names from the store (background); select `select` without reloading its settings."""
        edits = self._names_edits
        self._store(self.repo.names, lambda names, s=select, e=edits: self._on_names_job_succeeded(names, s, e),
                    what="list the profiles")

    def _on_names_job_succeeded(self, names: list[str], select: str | None, edits: int) -> None:
        # a save/rename/delete came after the question: ask again (runs after it)
        if edits != self._names_edits:
            self.reload_names(select=self.current_name)
            return
        self._names = list(names)
        self._show_name(select if select in names else None)

    def _on_names_current_changed(self, name: str) -> None:
        """The user picked a profile: load its newest version and its history (background)."""
        if not name:
            return
        repo = self.repo
        self._store(lambda: (repo.latest(name), repo.versions(name)), self._on_load_job_succeeded,
                    what=f"load {name!r}")

    def _on_load_job_succeeded(self, result) -> None:
        saved, versions = result
        if saved is None or self.names_list.currentItem() is None or \
                self.names_list.currentItem().text() != saved.name:
            return  # deleted meanwhile, or the user picked another one
        self.saved_profile = saved.profile
        self.set_profile(saved.profile, saved.name)
        self._fill_versions(versions)
        self.migrate_banner.check(saved)  # saved with another llama-server build? (ui/panels/profile_migrate.py)

    def _reload_versions(self) -> None:
        name, repo = self.current_name, self.repo
        if not name:
            self._fill_versions([])
            return
        self._store(lambda: repo.versions(name),
                    lambda vs, name=name: self._fill_versions(vs) if self.current_name == name else None,
                    what=f"list the versions of {name!r}")

    def _fill_versions(self, versions) -> None:
        self._versions = {v.version: v for v in versions}
        self.versions_list.clear()
        for v in versions:
            item = QListWidgetItem(f"v{v.version}  {v.created_at:%Y-%m-%d %H:%M}  {v.note}")
            item.setToolTip(f"Version {v.version}, saved "
                            f"{v.created_at:%Y-%m-%d %H:%M}" + (f": {v.note}" if v.note else ""))
            item.setData(Qt.ItemDataRole.UserRole, v.version)
            self.versions_list.addItem(item)
        self.revert_button.setEnabled(self.versions_list.count() > 1)
