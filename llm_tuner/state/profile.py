"""The Profile view's state and rules, Qt-free: the profile being edited, its saved name and saved settings
(modified or not), the fields whose text is not a value (and the problem that stops a launch), what the model
file and the binary say (read through a `Run`), the memory plan, the advice and the speed line.

`ui/panels/profile_panel.py` binds its widgets to it: a field's text is parsed by its editor; the
environment and extra-argument texts, and what they make together, are parsed here (`read_fields`). The
state publishes the edit to the `Workspace` (`publish`: profile and name; `recompute`: the problem and the
advice errors that Start and Run refuse), so the other views follow.

Topics: "profile" (the edited settings), "name" (current_name or saved_profile: the title), "problem" (the
invalid fields), "advice" (after every recompute: advice, plan), "speed" (the speed line).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core.advice import Advice, advise, router_text
from llm_tuner.core.cmdline import FlagCatalog, apply_fix, effective_profile, validate
from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.core.memory import plan_gpus
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services import device_ids
from llm_tuner.services.binaries import SERVER, catalog_for, is_trusted
from llm_tuner.services.preflight import look_at_model, plan_here
from llm_tuner.state.callbacks import Declared, Observable, Run, run_now
from llm_tuner.state.speed import SpeedModel, profile_argv, speed_line
from llm_tuner.state.workspace import Workspace

# An empty profile's "no model" advice, as a step rather than an error (Start still refuses it and says why)
FIRST_STEP = (
    "To start: pick a model in the Models list (or give the model file, -m); for a server of several "
    "models, a models folder (--models-dir)"
)
NUL_PROBLEM = "holds a NUL byte (\\0), which no program can take: remove it"
NO_TRAPS = "No known traps in these settings."


@dataclass(frozen=True)
class AdviceRow:
    """One line of the advice list: its severity (None: the first step, not a finding), text, tooltip, id."""

    severity: str | None
    text: str
    tooltip: str
    advice_id: str | None


@dataclass(frozen=True)
class ModelFacts:
    """What the model file and the binary said, for the (model, binary) they were read for."""

    key: tuple[str | None, str | None]
    exists: bool | None = None  # None until read
    info: ModelInfo | None = None
    fa_quants: tuple[str, ...] | None = None  # the binary's FA_QUANTS as its last start logged them


def read_facts(
    model: str | None, binary: str | None
) -> tuple[bool | None, ModelInfo | None, tuple[str, ...] | None]:
    """Slow (a file's header, a cached log): whether the model exists, its header and the binary's
    FA_QUANTS."""
    look = look_at_model(model)  # a folder or a truncated file comes back with its reason
    return look.exists, look.info, device_ids.cached_fa_quants(binary)


def parse_env(text: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The Environment box's `NAME=value` lines (an `export ` prefix, blank lines and # comments allowed)."""
    env: dict[str, str] = {}
    errors: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        if not sep or not name.strip():
            errors.append(("environment", f"the line {line!r} needs NAME=value"))
            continue
        env[name.strip()] = value
    return env, errors


class ProfileState(Observable):
    """The edited profile and the rules of the Profile view (see the module's text)."""

    profile = Declared[LaunchProfile](topic="profile", factory=LaunchProfile, same=lambda a, b: a is b)
    current_name = Declared[str | None](None, topic="name")  # its saved name (None: unsaved)
    saved_profile = Declared[LaunchProfile | None](None, topic="name")  # what the store holds for that name
    invalid_fields = Declared[tuple[str, ...]]((), topic="problem")  # labels of fields that are not a value

    def __init__(
        self,
        workspace: Workspace,
        *,
        speed: SpeedModel | None = None,
        run: Run = run_now,
        read: Callable[[str | None, str | None], tuple[Any, ...]] = read_facts,
    ) -> None:
        super().__init__()
        self.workspace = workspace
        self.speed = speed
        self._run = run
        self._read = read
        self.facts = ModelFacts((None, None))
        self._facts_asked = False
        self.advice: list[Advice] = []
        self.plan: Any = None  # the profile's memory plan here (services.preflight.plan_here)
        if speed is not None:
            speed.add_callback(lambda *_a: self.notify("speed"))

    # -- what the app knows --------------------------------------------------------------------------
    def catalog(self) -> FlagCatalog:
        """The flags of the llama-server the app found (its --help), else the tested build's."""
        return catalog_for(self.workspace.binaries.get(SERVER))

    def server_binary(self) -> str | None:
        """The llama-server this profile runs: its own, else the one the app found."""
        info = self.workspace.binaries.get(SERVER)
        return self.profile.binary or (str(info.path) if info is not None and info.path else None)

    # -- rules -------------------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        """The editor's settings differ from what the store holds for the name (or nothing is saved)."""
        return self.saved_profile is None or self.saved_profile != self.profile

    def title_parts(self) -> tuple[str, str, str]:
        """The command's title: the name (or "unsaved profile") and " (modified)" for a saved one edited."""
        name = self.current_name or "unsaved profile"
        return "", name, " (modified)" if self.dirty and self.current_name else ""

    @property
    def problem(self) -> str | None:
        """Why the edited profile must not run now: a field holds text that is not a value."""
        if not self.invalid_fields:
            return None
        return (
            f"Fix {', '.join(self.invalid_fields)} in the Profile tab first (marked in red): the command "
            "would otherwise run the last valid value."
        )

    def copy_refusal(self) -> str | None:
        """Why Copy waits (None: it copies)."""
        if not self.invalid_fields:
            return None
        verb = "is" if len(self.invalid_fields) == 1 else "are"
        return f"Nothing to copy until {', '.join(self.invalid_fields)} {verb} fixed (marked in red)"

    def router_line(self) -> str | None:
        return router_text(self.profile)

    def can_fix(self) -> bool:
        """Some removed flag has a replacement ("Fix removed flags")."""
        return any(r.fix for r in validate(self.profile, self.catalog()).removed)

    def fixed(self) -> LaunchProfile:
        """The profile with every removed flag replaced by what replaces it."""
        p = self.profile
        for r in validate(p, self.catalog()).removed:
            p = apply_fix(p, r, self.catalog())
        return p

    def program_state(self) -> str:
        """The profile's own llama-server: none, relative, missing, trusted or untrusted."""
        path = self.profile.binary
        if not path:
            return "none"
        if not Path(path).expanduser().is_absolute():  # relative to where the command ran, unknown here
            return "relative"
        if not Path(path).expanduser().is_file():
            return "missing"
        return "trusted" if is_trusted(path, self.workspace.settings) else "untrusted"

    def advice_rows(self) -> list[AdviceRow]:
        """The advice list's lines; an untouched profile's missing model is the first step, not an error."""
        untouched = self.profile == LaunchProfile()
        rows = [
            AdviceRow(
                None if untouched and a.id == "no-model" else a.severity,
                FIRST_STEP if untouched and a.id == "no-model" else f"{a.severity.upper()}: {a.message}",
                f"{a.reason}\nSource: {a.source}\nid: {a.id}",
                a.id,
            )
            for a in self.advice
        ]
        return rows or [AdviceRow(None, NO_TRAPS, "", None)]

    # -- editing -------------------------------------------------------------------------------------
    def read_fields(
        self,
        values: Mapping[str, object],
        field_errors: Sequence[tuple[str, str]],
        env_text: str,
        extra_text: str,
        other_errors: Sequence[tuple[str, str]] = (),
    ) -> tuple[LaunchProfile | None, list[tuple[str, str]]]:
        """The profile the fields describe (`values`: each field's parsed value), or None and each (where,
        problem); the invalid fields are kept (`invalid_fields`) and the problem published."""
        errors = list(field_errors)
        for where, text in (("environment", env_text), ("extra arguments", extra_text)):
            if "\0" in text:
                errors.append((where, NUL_PROBLEM))
        env, env_errors = parse_env(env_text)
        errors += env_errors
        try:
            extra = tuple(shlex.split(extra_text))
        except ValueError as exc:
            errors.append(("extra arguments", f"{exc} (close the quote)"))
            extra = self.profile.extra_args
        errors += other_errors
        self.invalid_fields = tuple(dict.fromkeys(where for where, _problem in errors))
        self.workspace.profile_problem = self.problem
        if errors:
            return None, errors
        kept = {k: v for k, v in values.items() if v is not None}
        spellings = {
            f: t for f, t in self.profile.spellings.items() if f in kept
        }  # the user's own flag names
        return LaunchProfile.model_validate(
            {**kept, "binary": self.profile.binary, "env": env, "extra_args": extra, "spellings": spellings}
        ), []

    def show(self, profile: LaunchProfile, name: str | None) -> None:
        """The editor shows `profile` under `name` (loaded, imported, reverted...): no field is invalid."""
        self.profile = profile
        self.current_name = name
        self.invalid_fields = ()
        self.workspace.profile_problem = None

    def publish(self) -> None:
        """Tell the other views: the edited profile and its name (the Plan, Live, Benchmarks, Tune follow)."""
        self.workspace.publish_profile(self.profile, self.current_name)

    def is_echo(self, profile: LaunchProfile | None) -> bool:
        """The workspace's profile is our own publication (or none): nothing to show."""
        return profile is None or profile is self.profile

    # -- facts, plan and advice ------------------------------------------------------------------------
    def load_facts(self) -> None:
        """Look at the model file and the binary through `run` (off the GUI thread where there is one), once
        per (model, binary); the answer recomputes the advice."""
        key = (effective_profile(self.profile).model, self.server_binary())  # LLAMA_ARG_MODEL counts too
        if key == self.facts.key and self._facts_asked:
            return
        self.facts, self._facts_asked = ModelFacts(key), True
        model, binary = key
        self._run(
            lambda: self._read(model, binary),
            lambda result: self.facts_read(key, *result),
            self._facts_failed,
        )

    def _facts_failed(self, exc: BaseException) -> None:
        raise exc  # no view of its own: the Run's owner reports it (the error surface)

    def facts_read(
        self,
        key: tuple[str | None, str | None],
        exists: bool | None,
        info: ModelInfo | None,
        quants: tuple[str, ...] | None,
    ) -> None:
        """The facts for `key` arrived; an answer for another (model, binary) than the one asked last is
        dropped."""
        if key == self.facts.key:
            self.facts = ModelFacts(key, exists, info, quants)
            self.recompute()

    def recompute(self) -> None:
        """The plan and the advice of the edited profile; its errors go to the workspace (Start, Run refuse
        them)."""
        self.load_facts()  # a new model or binary: its facts are unknown until read
        p, facts = self.profile, self.facts
        inventory = self.workspace.inventory
        self.plan, pipe = plan_here(
            p, facts.info, inventory
        )  # pure: the plan's advice (prompt cache, pipeline)
        self.advice = advise(
            p,
            self.catalog(),
            facts.info,
            n_gpus=len(inventory.devices) if inventory else None,
            model_file_exists=facts.exists,
            fa_quants=facts.fa_quants,
            plan=self.plan,
            physical_cores=inventory.host.cores_physical if inventory is not None else None,
            pipeline=pipe,
            host_available_mib=inventory.host.memory_available_mib if inventory is not None else None,
        )
        self.workspace.publish_checks(self.problem, [a for a in self.advice if a.severity == "error"])
        self.notify("advice")
        self.notify("speed")

    def speed_text(self) -> str | None:
        """The predicted speed of the command and what it is calibrated on (None: no plan to predict from)."""
        if self.plan is None or self.speed is None:
            return None
        inventory = self.workspace.inventory
        pr = self.speed.predict(
            self.facts.info,
            self.plan,
            argv=profile_argv(self.profile),
            gpus=plan_gpus(inventory) if inventory is not None else None,
        )
        return speed_line(pr, self.speed.basis)
