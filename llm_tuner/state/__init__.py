"""Qt-free state of the views: what a view shows and what a user's action does, as plain objects.

glue's viewer-state pattern (glue/viewers/*/state.py, bound to widgets by glue_qt): a model here holds the
view's state and its rules and calls back when it changes; a panel in `ui/` binds its widgets to it and runs
what needs Qt (threads, the server bridges). A contract in pyproject checks that nothing here imports Qt, so
tests drive the models as a panel would, without a widget (tests/unit/test_live_state.py, test_plan_state.py).

workspace.py  Workspace: what the whole app shares (binaries, devices, settings, the model picked, the edited
         profile, its name, problem and errors, the saved profiles' names, the complete runs, the runs
         compared, the shown server) and the requests between views; panels and the quick start talk only
         through it (qt.context.AppState is its Qt face)
profile.py  ProfileState: the Profile view's edited profile, its name, modified or not, invalid fields, the
         model's facts, the advice and the speed line
live.py  LiveFleet: the servers the Live view watches (slots), which one is shown, where a Start goes, port
         clashes, the llama-server a launch runs and whether it is trusted
profile_flags.py  the "All flags" section's words and search rule
profile_library.py  ProfileLibraryState: the Profile view's saved names and versions; save, new,
         duplicate, rename, delete, revert, every store call in order through `run`
profile_migrate.py  MigrationState: the Profile tab's build banner: the check, the moves, the choices, the
         diff, Apply
live_views.py  the Live view's sub-views: RequestsFeed (the Requests tab's batches, its words, Show all),
         SessionHistory (the History tab's sessions), RouterModelsState (a router's models, Load and Unload),
         LogLines (the log console's lines and filter), devices_note (the Devices tab's words)
plan.py  PlanState: the Plan view's model, arguments, devices, calibrations, and each change (a control, the
         solver's answer, a rule) as the changes it makes to the profile being edited; its predicted speed
plan_controls.py  the Plan settings box's values a control cannot show: the words, which are marked
router_plan.py  RouterPlanState: the Plan's router box: a router profile's models planned together (its
         table, sets and --models-max), its presets file written and read
speed.py SpeedModel: what predictions rest on (loaded through `run`), and the words every view uses for them
get_models.py  GetModelsState: the Get models dialog's search and hits, the files listed with their plans and
         predicted speeds, the file and folder chosen, the download's progress and words
bench.py BenchSpeed: after a benchmark, measured beside predicted and the roofline's share; the refit it makes
paste_command.py  PasteState: the Paste command dialog's reading, its report, Import or why not
models.py  ModelsState: the Models view's folders, what a scan found, its summary line, the details' text
chat.py  ChatState: the Chat's server, a router's model picked, reply limits, what /props says, the controls
compare_builds.py  BuildsAB: Compare's "vs another build" row: the profiles, the A/B's words, the
         re-tune it offers
compare.py  CompareState: Compare's choices (runs or profiles), the pair chosen, the verdict, what differs
benchmarks.py  BenchmarksState: the Run tab's form and its rules, the job's words, the run and sweep shown
bench_history.py  BenchHistory: the History's filters, the runs listed, open, delete, compare two, export
workers.py  WorkersState: Settings' RPC workers: the list, local workers started and stopped, the check
settings_form.py  the Settings dialog's form and the settings it makes (empty path: found automatically)
tune.py  TuneState: the Tune view's base, knobs proposed, candidates, the tune's words, its result and save
tune_result.py  the words of a tune's result (verdict, details, save button) and of its candidates;
         ShownResult: the result shown, the name a save needs, the report's export
"""

from llm_tuner.state.callbacks import Declared, Observable, Run, run_now
from llm_tuner.state.chat import ChatState
from llm_tuner.state.live import LiveFleet, ServerSlot, StartFacts
from llm_tuner.state.models import ModelsState
from llm_tuner.state.plan import PlanState
from llm_tuner.state.profile import ProfileState
from llm_tuner.state.workspace import Workspace

__all__ = ["ChatState", "Declared", "LiveFleet", "ModelsState", "Observable", "PlanState", "ProfileState",
           "Run", "ServerSlot", "StartFacts", "Workspace", "run_now"]
