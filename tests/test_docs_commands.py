"""Docs that run: every ``gg …`` command in README.md and docs/*.md (fenced blocks) is checked
against the real CLI: the command exists and every option it uses is accepted, including the
arguments a recipe passes after ``--`` into a unit's own command (``gg install``) (issue 24,
point 10). Synopsis markup (``[--env NAME]``, ``a|b``, ``…``) is read as a synopsis: every
alternative must exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# After `gg install ROLE … --`, the words are the unit's own command's.
INSTALLED = {"runner": ("runner", "up"), "maintainer": ("runner", "maintain"),
             "server": ("server",)}
GG_WORD = re.compile(r"^(?:\./)?(?:gg|\S*gg-\S*\.pyz)$")


SHELL_FENCES = ("", "sh", "bash", "shell", "console")


def doc_lines() -> list[tuple[str, int, str]]:
    """(file, line number, line) of every shell block's line that runs gg. A block whose
    fence names another language (```text for a diagram, ```nginx) is not shell."""
    found = []
    for path in DOCS:
        fenced, shell = False, False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                shell = fenced and line.strip().strip("`").strip() in SHELL_FENCES
                continue
            if shell and re.search(r"(^|[\s$(])(\./)?gg(-\S*\.pyz)?\s", line):
                found.append((path.relative_to(ROOT).as_posix(), number, line))
    return found


def commands(line: str) -> list[list[str]]:
    """The gg invocations on one line of a shell block, as words."""
    line = re.split(r"\s{3,}", line.strip())[0]  # a column after wide space is a comment
    line = re.sub(r"\$\([^)]*\)", "X", line)  # a substitution stands for one word
    line = line.replace("…", " ").replace("...", " ")
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        words = line.split()
    found: list[list[str]] = []
    current: list[str] | None = None
    other = False  # this segment runs another program
    for word in words + [";"]:
        if word in (";", "&&", "||", "&", "|") or word.endswith(";"):
            if current:
                found.append(current)
            current, other = None, False
            continue
        if current is not None:
            current.append(word)
        elif not other:
            if re.fullmatch(r"[A-Z_]+=\S*", word) or word in ("$", "python3", "sudo", "env"):
                continue
            if GG_WORD.match(word):
                current = []
            else:
                other = True
    return found


def _clean(words: list[str]) -> list[str]:
    out = []
    for word in words:
        if word in ("|", "[", "]"):
            continue
        word = word.strip("[]()")
        if word:
            out.append(word)
    return out


def _root():
    import typer

    from gg.cli.app import app

    return typer.main.get_command(app)


def _names(command) -> dict[str, bool]:
    """Every option name of ``command`` -> whether it takes a value."""
    names = {}
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option":
            continue
        for name in [*param.opts, *getattr(param, "secondary_opts", [])]:
            names[name] = not (param.is_flag or getattr(param, "count", False))
    names["--help"] = names["-h"] = False
    return names


def check(words: list[str], where: str) -> list[str]:
    """Problems with one invocation (empty: it is a command the CLI accepts)."""
    import typer

    root = _root()
    ctx = typer.Context(root, info_name="gg")
    words = _clean(words)
    problems: list[str] = []
    root_opts = _names(root)
    path: list[str] = []
    command = root
    i = 0
    while i < len(words) and hasattr(command, "get_command"):
        word = words[i]
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            if name not in _names(command) and name not in root_opts:
                problems.append(f"{where}: gg {' '.join(path)} has no option {name}")
            elif _names(command).get(name, root_opts.get(name)) and "=" not in word:
                i += 1
            i += 1
            continue
        alternatives = word.split("|")
        subs = [command.get_command(ctx, alt) for alt in alternatives]
        if not all(subs):
            missing = [a for a, s in zip(alternatives, subs, strict=True) if s is None]
            problems.append(f"{where}: gg {' '.join(path)} has no command {'|'.join(missing)}")
            return problems
        for alt, sub in zip(alternatives[1:], subs[1:], strict=True):
            if hasattr(sub, "get_command"):  # a group among alternatives: check each branch
                problems += check([*path, alt, *words[i + 1:]], where)
        path.append(alternatives[0])
        command = subs[0]
        i += 1
    if hasattr(command, "get_command"):
        return problems  # a group named alone prints its help
    names = _names(command)
    rest = words[i:]
    j = 0
    while j < len(rest):
        word = rest[j]
        if word == "--":
            after = rest[j + 1:]
            if path and path[0] == "install":
                role = next((w for w in rest[:j] if w in INSTALLED), None)
                for r in ([role] if role else list(INSTALLED)):
                    problems += _check_unit(INSTALLED[r], after, where, root_opts)
            break
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-\d+", word):
            name = word.split("=", 1)[0]
            if name not in names:  # gg's global options go before the subcommand
                problems.append(f"{where}: gg {' '.join(path)} has no option {name}")
            elif names[name] and "=" not in word:
                j += 1
        j += 1
    return problems


def _check_unit(target: tuple[str, ...], words: list[str], where: str, root_opts) -> list[str]:
    """The words after ``--`` of ``gg install``: options of the unit's own command, or gg's
    global options (the unit puts those before the subcommand)."""
    import typer

    root = _root()
    ctx = typer.Context(root, info_name="gg")
    command = root
    for name in target:
        command = command.get_command(ctx, name)
    names = _names(command)
    problems = []
    j = 0
    while j < len(words):
        word = words[j]
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            if name not in names and name not in root_opts:
                problems.append(f"{where}: the unit's gg {' '.join(target)} has no option {name}")
            elif names.get(name, root_opts.get(name)) and "=" not in word:
                j += 1
        j += 1
    return problems


LINES = doc_lines()


def test_the_docs_show_commands_at_all():
    assert len(LINES) > 50


@pytest.mark.parametrize("where,line", [(f"{f}:{n}", text) for f, n, text in LINES],
                         ids=[f"{f}:{n}" for f, n, _ in LINES])
def test_every_documented_command_is_one_the_cli_accepts(where, line):
    problems = []
    for words in commands(line):
        problems += check(words, where)
    assert not problems, "\n".join(problems) + f"\n  {line.strip()}"


def test_the_checker_catches_an_option_no_command_has():
    assert check(["runner", "up", "--server", "http://x"], "t")  # the old unit's mistake
    assert check(["fligths"], "t")
    assert not check(["--server", "http://x", "runner", "up", "--labels", "a=b"], "t")
    assert _check_unit(("runner", "up"), ["--server", "U", "--enrol-file", "F"], "t", {
        "--server": True})  == []
    assert _check_unit(("runner", "up"), ["--no-such"], "t", {}) != []
