"""Tokenise pasted command text (never a shell): commands, redirects, Windows paths, `~` and $HOME."""

from __future__ import annotations

import os
import re
import shlex

from pydantic import BaseModel, ConfigDict

from llm_tuner.core.cmdline.fields import _ASSIGN_RE, _NEG_NUMBER

# -- tokenising pasted text (never a shell) ------------------------------------------------------

# Pasted text longer than this is refused (a command line is a few KiB; a pasted file is a mistake).
PASTE_LIMIT_CHARS = 256 * 1024

_PLAIN = re.compile(r"[^ \t\r\n\\'\"]+")
_PLAIN_DQ = re.compile(r'[^"\\]+')


def posix_split(text: str) -> list[str]:
    """`shlex.split(text)` (POSIX rules, no comments) in linear time: shlex grows each token one character
    at a time, so one pasted 1 MB word took ~20 s. Raises ValueError on an open quote or a trailing `\\`,
    with shlex's messages.
    """
    out: list[str] = []
    buf: list[str] = []
    started = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            if started:
                out.append("".join(buf))
                buf.clear()
                started = False
            i += 1
            continue
        started = True
        if ch == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            buf.append(text[i + 1])
            i += 2
        elif ch == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise ValueError("No closing quotation")
            buf.append(text[i + 1:j])
            i = j + 1
        elif ch == '"':
            i += 1
            while True:
                if i >= n:
                    raise ValueError("No closing quotation")
                m = _PLAIN_DQ.match(text, i)
                if m:
                    buf.append(m.group())
                    i = m.end()
                    continue
                if text[i] == '"':
                    i += 1
                    break
                if i + 1 >= n:  # a backslash at the very end
                    raise ValueError("No escaped character")
                nxt = text[i + 1]
                buf.append(nxt if nxt in '"\\' else "\\" + nxt)  # only \" and \\ are escapes in "..."
                i += 2
        else:
            m = _PLAIN.match(text, i)
            # not a blank, a quote or a backslash (taken above): a plain word starts here
            assert m is not None
            buf.append(m.group())
            i = m.end()
    if started:
        out.append("".join(buf))
    return out


def _split_commands(text: str) -> tuple[list[str], list[str]]:
    """Split pasted text into simple commands at unquoted newlines, `;`, `&&`, `||`, `|`, `&`, and drop
    redirections (`> file`, `2>&1`). Returns (command texts, notes). Quotes are respected; nothing is
    expanded or executed.
    """
    text = re.sub(r"[ \t][\^`]\r?\n", " ", text)  # cmd.exe ^ and PowerShell ` continuations
    commands: list[str] = []
    notes: list[str] = []
    cur: list[str] = []
    i, n = 0, len(text)
    quote: str | None = None

    def end_command() -> None:
        chunk = "".join(cur).strip()
        if chunk:
            commands.append(chunk)
        cur.clear()

    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < n:
                if text[i + 1] == "\n":  # backslash-newline inside double quotes is removed
                    i += 2
                    continue
                cur.append(text[i:i + 2])
                i += 2
                continue
            cur.append(ch)
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            cur.append(ch)
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            if text[i + 1] == "\n" or text[i + 1:i + 3] == "\r\n":  # POSIX line continuation
                cur.append(" ")
                i += 2 if text[i + 1] == "\n" else 3
                continue
            cur.append(text[i:i + 2])
            i += 2
            continue
        if ch == "#" and (not cur or cur[-1][-1:].isspace()):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch in "\n;|&":
            if ch == "&" and i + 1 < n and text[i + 1] == ">":  # &> file
                i = _skip_redirect(text, i + 2, notes)
                continue
            end_command()
            if text[i:i + 2] in ("&&", "||"):
                i += 1
            i += 1
            continue
        if ch in "<>":
            # a file-descriptor digit glued to the operator belongs to it (2>&1)
            if cur and cur[-1].isdigit() and (len(cur) == 1 or cur[-2][-1:].isspace()):
                cur.pop()
            j = i + 1
            if j < n and text[j] in ">&":
                j += 1
            i = _skip_redirect(text, j, notes)
            continue
        cur.append(ch)
        i += 1
    end_command()
    return commands, notes


def _skip_redirect(text: str, i: int, notes: list[str]) -> int:
    """Skip the target word of a redirection starting at `i`; returns the index after it."""
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    start = i
    quote = None
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in " \t\n;|&<>":
            break
        i += 1
    notes.append(f"ignored the shell redirection to {text[start:i] or '(nothing)'}")
    return i


_WRAPPED_SERVER = re.compile(r"(^|[\\/])(llama-server|server)(\.exe)?$|(^|[\\/])llama(\.exe)?$")
_WINDOWS_PROGRAM = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\.\\|[A-Za-z]:\\|\S*\.exe(?:\s|$))")


def _keep_windows_backslashes(cmd: str) -> str:
    """A command for Windows uses backslash as the path separator, not as an escape: double every
    backslash outside single quotes (and not before a double quote) so shlex keeps it."""
    out: list[str] = []
    in_single = False
    for i, ch in enumerate(cmd):
        if ch == "'":
            in_single = not in_single
        if ch == "\\" and not in_single and cmd[i + 1:i + 2] != '"':
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


_TILDE = re.compile(r"~([A-Za-z0-9._-]*)(?=[/\s]|$)")
_HOME_VAR = re.compile(r"\$(?:HOME\b|\{HOME\})")
_ASSIGN_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _expand_home(cmd: str, home: str) -> tuple[str, bool]:
    """Expand what a POSIX shell expands to a home folder, and nothing else: an unquoted `~` or `~user`
    starting a word (or an assignment's value: `VAR=~/x`), and `$HOME` / `${HOME}` outside single quotes.
    A quoted `'~/x'` or `"~/x"` stays literal, as in bash. The expansion is quoted so shlex keeps it one
    word. Returns (text, whether anything was expanded).
    """
    out: list[str] = []
    i, n = 0, len(cmd)
    quote: str | None = None
    word_start, expanded = True, False
    while i < n:
        ch = cmd[i]
        if quote is None and word_start:
            word_start = False
            assign = _ASSIGN_PREFIX.match(cmd, i)
            j = assign.end() if assign else i
            tilde = _TILDE.match(cmd, j)
            if tilde is not None:
                value = home if not tilde.group(1) else os.path.expanduser(tilde.group(0))
                if value != tilde.group(0):  # ~nosuchuser stays as written, as in bash
                    out.append(cmd[i:j] + shlex.quote(value))
                    i, expanded = tilde.end(), True
                    continue
        if quote != "'":
            var = _HOME_VAR.match(cmd, i)
            if var is not None:
                out.append(shlex.quote(home) if quote is None else home.replace("\\", "\\\\").replace('"', '\\"'))
                i, expanded = var.end(), True
                continue
        if ch == "\\" and quote != "'" and i + 1 < n:
            out.append(cmd[i:i + 2])
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif ch == quote:
            quote = None
        elif quote is None and ch.isspace():
            word_start = True
        out.append(ch)
        i += 1
    return "".join(out), expanded


def _is_server_program(word: str) -> bool:
    base = re.split(r"[\\/]", word)[-1].lower()
    return "llama" in base or "server" in base or base.endswith(".exe")


class SplitCommand(BaseModel):
    """A pasted command taken apart (no flag is interpreted yet)."""

    model_config = ConfigDict(frozen=True)

    binary: str | None = None
    argv: tuple[str, ...] = ()
    env: dict[str, str] = {}
    notes: tuple[str, ...] = ()


def split_command_text(text: str, home: str | None = None) -> SplitCommand:
    """Take pasted shell text apart: `export`/`VAR=value` assignments, the program, its arguments.

    Tokenises with shlex (POSIX rules) and never runs anything. Given `home`, an unquoted `~` and
    `$HOME` are expanded to it as a shell would (not in a Windows command); nothing else is expanded.
    Pipes, `&&` chains and redirections are dropped with a note; a `docker run ... llama.cpp:server ...`
    keeps the server's arguments.
    """
    notes: list[str] = []
    env_out: dict[str, str] = {}
    binary: str | None = None
    commands, split_notes = _split_commands(text)
    notes += split_notes
    argv: list[str] = []
    found = expanded = False
    for cmd in commands:
        if _WINDOWS_PROGRAM.match(cmd):
            cmd = _keep_windows_backslashes(cmd)
        elif home is not None:
            cmd, did = _expand_home(cmd, home)
            expanded = expanded or did
        try:
            words = posix_split(cmd)
        except ValueError as exc:  # unbalanced quotes: fall back to whitespace words
            notes.append(f"could not read the quoting ({exc}); split on spaces instead")
            words = cmd.split()
        if found and words and words[0].startswith("-") and not _NEG_NUMBER.match(words[0]):
            argv += words  # arguments continued on the next line without a backslash
            notes.append("joined arguments written on several lines without a trailing backslash")
            continue
        if found:
            notes.append(f"ignored what follows the server command: {cmd[:80]}")
            continue
        w = 0
        if words and words[0] in ("export", "set", "env"):
            w = 1
        while w < len(words) and (assign := _ASSIGN_RE.match(words[w])) is not None:
            k, v = assign.groups()
            env_out[k] = v
            w += 1
        rest = words[w:]
        if not rest:
            continue
        if words[0] == "export":
            notes.append(f"ignored export of a name without a value: {' '.join(rest)}")
            continue
        if rest[0] in ("docker", "podman"):
            img = next((j for j, x in enumerate(rest) if "llama.cpp:" in x or "llama-server" in x), None)
            if img is None:
                notes.append(f"ignored a {rest[0]} command without a llama.cpp image")
                continue
            for j, x in enumerate(rest[:img]):
                if x in ("-e", "--env") and j + 1 < img and (assign := _ASSIGN_RE.match(rest[j + 1])) is not None:
                    k, v = assign.groups()
                    env_out[k] = v
            notes.append(f"read the llama-server arguments of a {rest[0]} command; the container options "
                         "were left out")
            binary, argv, found = rest[img], rest[img + 1:], True
            continue
        if rest[0].startswith("-"):
            argv, found = rest, True
            continue
        if not _is_server_program(rest[0]):
            # a wrapper in front of the server: gdb --args, xargs, nohup, numactl ..., sudo, time
            at = next((j for j, x in enumerate(rest) if _WRAPPED_SERVER.search(x)), None)
            if at is not None:
                notes.append(f"ignored the wrapper in front of the server: {' '.join(rest[:at])}")
                rest = rest[at:]
        if _is_server_program(rest[0]):
            binary = rest[0]
            argv = rest[1:]
            if argv and argv[0] in ("serve", "server") and re.split(r"[\\/]", binary)[-1] in ("llama", "llama.exe"):
                argv = argv[1:]
            found = True
            continue
        notes.append(f"ignored a command that is not llama-server: {cmd[:80]}")
    if not found:
        notes.append("no llama-server command found")
    if expanded:
        notes.append(f"expanded ~ and $HOME to {home}, as a shell would")
    return SplitCommand(binary=binary, argv=tuple(argv), env=env_out, notes=tuple(notes))
