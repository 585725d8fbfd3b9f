"""Writes llama-server-help-2026-04.txt: the embedded build's --help (llama-server-help.txt) with the flags
spelled as builds before 2026-04-26 spelled them (the speculative-decoding rename) and before `--load-mode`
(`--mmap`/`--no-mmap`, `--mlock`, `-dio`), per /work/shared/reference/llama-server.md ("Removed with an
explicit error", arg.cpp:4408-4445) and upstream's tools/server/README.md of that time. Run from this folder:
    python make_old_help.py
Kept with its output so the derivation can be read and redone; no test imports it."""

from pathlib import Path

here = Path(__file__).parent
text = (here / "llama-server-help.txt").read_text()
lines = text.splitlines()


def cut(start: str, until_prefix: tuple[str, ...] = ("-",)) -> tuple[int, int]:
    """The line span of the flag entry starting with `start` (up to the next entry)."""
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    j = i + 1
    while j < len(lines) and not lines[j].startswith(until_prefix) and not lines[j].startswith("-----"):
        j += 1
    return i, j


def replace(start: str, new: list[str]) -> None:
    i, j = cut(start)
    lines[i:j] = new


def drop(start: str) -> None:
    i, j = cut(start)
    del lines[i:j]


replace("-lm,   --load-mode", [
    "--mlock                                 force system to keep model in RAM rather than swapping or compressing",
    "                                        (env: LLAMA_ARG_MLOCK)",
    "--mmap, --no-mmap                       whether to memory-map model. (if mmap disabled, slower load but may",
    "                                        reduce pageouts if not using mlock) (default: enabled)",
    "                                        (env: LLAMA_ARG_MMAP)",
    "-dio,  --direct-io, --no-direct-io      use DirectIO if available. (default: disabled)",
    "                                        (env: LLAMA_ARG_DIO)",
])
replace("--spec-draft-n-max N", [
    "--draft, --draft-n, --draft-max N       number of tokens to draft for speculative decoding (default: 16)",
    "                                        (env: LLAMA_ARG_DRAFT_MAX)",
])
replace("--spec-draft-n-min N", [
    "--draft-min, --draft-n-min N            minimum number of draft tokens to use for speculative decoding",
    "                                        (default: 0)",
    "                                        (env: LLAMA_ARG_DRAFT_MIN)",
])
replace("--spec-draft-p-min, --draft-p-min P", [
    "--draft-p-min P                         minimum speculative decoding probability (greedy) (default: 0.75)",
    "                                        (env: LLAMA_ARG_DRAFT_P_MIN)",
])
replace("--spec-draft-model, -md, --model-draft FNAME", [
    "-md,   --model-draft FNAME              draft model for speculative decoding (default: unused)",
    "                                        (env: LLAMA_ARG_MODEL_DRAFT)",
])
for gone in ("--spec-ngram-mod-n-min", "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match",
             "--draft, --draft-n, --draft-max N       the argument", "--draft-min, --draft-n-min N            the",
             "--spec-ngram-size-n N                   the argument", "--spec-ngram-size-m N                   the",
             "--spec-ngram-min-hits N                 the argument"):
    drop(gone)
i, _ = cut("--spec-ngram-simple-size-n")
lines[i:i] = [
    "--spec-ngram-size-n N                   ngram size N for ngram-simple/ngram-map speculative decoding, length",
    "                                        of lookup n-gram (default: 12)",
    "--spec-ngram-size-m N                   ngram size M for ngram-simple/ngram-map speculative decoding, length",
    "                                        of draft m-gram (default: 48)",
    "--spec-ngram-min-hits N                 minimum hits for ngram-map speculative decoding (default: 1)",
]
(here / "llama-server-help-2026-04.txt").write_text("\n".join(lines) + "\n")
