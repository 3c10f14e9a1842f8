"""Docs that cannot drift from what gg prints (issue 24, point 10). Read as text, no server:

- **A quoted claim**: a sentence of README.md or docs/*.md that says what gg prints, reads,
  says, shows or answers, followed by the quoted text (``reads `drained` ``, ``prints "…"``,
  ``refused with one sentence: `…` ``). Every literal piece of the quote (placeholders such
  as F, NAME, URL, ``<why>`` and ``…``, ids, digests and numbers set aside) must appear in gg's source, where it is
  produced, or in a test, where it is asserted.
- **A sample output block**: a fenced block whose line before is
  ``<!-- output: tests/FILE.py::test_name -->``. The named test exists, and every literal
  piece of every line (ids, digests, numbers and placeholders set aside) appears in gg's
  source or in that test's file.
- Every fenced block without a language is either shell (its ``gg`` lines are checked by
  test_docs_commands.py) or marked as output; a diagram, a layout or a syntax says so by its
  language (```text).

A doc that changes what it claims, or a gg that stops printing it, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*output:\s*(tests/[\w/.-]+\.py)::(\w+)\s*-->")

# What a doc writes in place of a value.
PLACEHOLDER = re.compile(
    r"\b(?:F|R|N|G|P|S|E|K|V|A|B|C|NAME|URL|PROFILE|POOL|DIR|FILE|WHY|KEY|HOST|PORT|USER|DUR|"
    r"SIZE|CMD|COMMAND|ENV|GROUP|RUNNER|PERSON|KINDS|TOKEN|ROLE|REPO|SLUG|LABEL|STATE|REASON|"
    r"STATE_DIR|ID)\b|\bv\(N-1\)|\bvN\b|<[^>]*>|…|\.\.\.|\{[^}]*\}")
# What varies from run to run in sample output.
VARYING = re.compile(r"\b[a-z]{1,2}_[0-9a-z…]*|\S+-[0-9a-f]{10}\b|\S+[/.]\S+|`[^`]*`|'[^']*'|sha256:\S*|SHA256:\S*|\b\d[\d.:,%]*[a-z]*\b"
                     r"|\s{2,}|^\$ .*")
VERB = re.compile(
    r"\b(?:prints?|printed|reads?|says?|said|shows?|answers?|answered|ends? with|"
    r"refused with[^`\"]{0,30}|sentence|message|note|line)[:,]?\s+"
    r"(?:as |with |like |that |the )?(?:\"([^\"\n]{3,300})\"|`([^`\n]{3,300})`)")
SHELL_FENCES = ("", "sh", "bash", "shell", "console")


def _corpus(paths) -> str:
    """Source text with adjacent string literals joined (a sentence split over lines)."""
    text = "\n".join(p.read_text(errors="replace") for p in paths)
    return re.sub(r"([\"'])\s*\n\s*[rbfRBF]*([\"'])", "", text)


SOURCE = _corpus([*(ROOT / "gg").rglob("*.py"), *(ROOT / "gg").rglob("*.html"),
                  *(ROOT / "gg").rglob("*.js")])
TESTS = _corpus(p for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__).resolve())


def _templates() -> list[list[tuple[bool, str]]]:
    """gg's f-strings as (literal?, text) parts, for a doc that quotes a sentence with example
    values where the source has a variable."""
    import ast

    found = []
    for path in (ROOT / "gg").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                found.append([(True, v.value) if isinstance(v, ast.Constant) else (False, "")
                              for v in node.values])
    return found


TEMPLATES = _templates()


def _produces(parts: list[tuple[bool, str]], piece: str) -> bool:
    """Whether some run of an f-string's parts, each ``{…}`` standing for any text, reads
    exactly ``piece`` (at least 8 of its characters literal, 16 when it ends in a value)."""
    for i in range(len(parts)):
        for j in range(i + 1, len(parts) + 1):
            window = list(parts[i:j])
            fixed = sum(len(text) for literal, text in window if literal)
            if fixed < 8 or (fixed < 16 and not (window[0][0] and window[-1][0])):
                continue  # a short word and a value could be anything
            if window[0][0]:
                window[0] = (True, window[0][1].lstrip())
            if window[-1][0]:
                window[-1] = (True, window[-1][1].rstrip())
            pattern = "".join(re.escape(text) if literal else ".+?" for literal, text in window)
            if re.fullmatch(pattern, piece):
                return True
    return False


def printed(piece: str, *texts: str) -> bool:
    """Whether ``piece`` is in gg's source or one of ``texts``, or an f-string of gg's
    produces it."""
    if piece in SOURCE or any(piece in text for text in texts):
        return True
    return any(_produces(parts, piece) for parts in TEMPLATES
               if any(literal and len(text.strip()) >= 5 and text.strip() in piece
                      for literal, text in parts))


# A JSON or YAML field as a doc quotes it: the key is what gg must name.
FIELD = re.compile(r"^\"?([a-z_]+)\"?: (?:true|false|null|\d+|[a-z_]+|\"[^\"]*\")$")
# A state word before a sentence: ``degraded: …``, ``waiting: …`` (gg joins the two).
STATE = re.compile(r"^(?:degraded|waiting|failed|remedy|note|gg): ")
# Quoted output that is another program's, or that gg builds from parts no f-string holds.
NOT_ONE_STRING = {
    "database is locked": "SQLite's own message, quoted from a peer's server log",
    "cannot reach the control plane at any of A, B, C":
        "gg/client.py: 'any of ' + the URLs, then the Unreachable sentence",
}


def pieces(text: str, shortest: int = 4, varying: bool = False) -> list[str]:
    field = FIELD.match(text)
    if field:
        return [field.group(1)]
    text = PLACEHOLDER.sub("\0", STATE.sub("\0", text))
    if varying:
        text = VARYING.sub("\0", text)
    return [p.strip() for p in text.split("\0") if len(p.strip()) >= shortest]


def paragraphs(path: Path):
    """(line, text) of each paragraph outside fenced blocks."""
    fenced, current, start = False, [], 1
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```") or (not fenced and not line.strip()):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if current:
                yield start, " ".join(current)
            current = []
            continue
        if fenced:
            continue
        if not current:
            start = number
        current.append(line.strip())
    if current:
        yield start, " ".join(current)


def claims() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for start, text in paragraphs(path):
            for match in VERB.finditer(text):
                quote = match.group(1) or match.group(2)
                if quote.startswith(("gg ", "--")):
                    continue  # a command, checked by test_docs_commands.py
                found.append((f"{path.relative_to(ROOT)}:{start}", quote))
    return found


def blocks() -> list[tuple[str, str, str | None, list[str]]]:
    """(where, fence language, marker line or None, lines) of every fenced block."""
    found = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].lstrip().startswith("```"):
                lang = lines[i].strip().strip("`").strip()
                j = i + 1
                while j < len(lines) and not lines[j].lstrip().startswith("```"):
                    j += 1
                before = lines[i - 1] if i else ""
                found.append((f"{path.relative_to(ROOT)}:{i + 1}", lang,
                              before if MARKER.search(before) else None, lines[i + 1:j]))
                i = j
            i += 1
    return found


CLAIMS = claims()
BLOCKS = blocks()


def test_the_docs_make_claims_at_all():
    assert len(CLAIMS) > 50
    assert sum(1 for b in BLOCKS if b[2]) >= 7


@pytest.mark.parametrize("where,quote", CLAIMS, ids=[f"{w}:{q[:40]}" for w, q in CLAIMS])
def test_every_quoted_claim_is_printed_by_gg_or_asserted_by_a_test(where, quote):
    if quote in NOT_ONE_STRING:
        return
    missing = [p for p in pieces(quote, varying=True) if not printed(p, TESTS)]
    assert not missing, f"{where}: {quote!r}: no source prints and no test asserts {missing}"


def test_every_block_without_a_language_is_shell_or_marked_output():
    unknown = []
    for where, lang, marker, lines in BLOCKS:
        if marker or lang not in SHELL_FENCES:
            continue
        words = [line.strip() for line in lines if line.strip()]
        if any(re.match(r"(?:\$ |[A-Z_]+=\S* )?(?:\./)?gg\b|\S*gg-\S*\.pyz|python3? |"
                        r"PYTHONPATH=|scripts/|curl |git |mkdir |\(umask ", word)
               for word in words):
            continue
        unknown.append(f"{where}: {words[0][:60] if words else '(empty)'}")
    assert not unknown, ("fenced blocks that are neither shell nor marked "
                         "<!-- output: tests/…::test --> (a diagram says ```text):\n"
                         + "\n".join(unknown))


MARKED = [(w, MARKER.search(m).groups(), lines) for w, _, m, lines in BLOCKS if m]


@pytest.mark.parametrize("where,test,lines", MARKED, ids=[w for w, _, _ in MARKED])
def test_every_sample_output_block_is_printed_by_gg_or_asserted_by_its_test(where, test, lines):
    file, name = test
    path = ROOT / file
    assert path.is_file(), f"{where}: {file} does not exist"
    text = path.read_text()
    assert re.search(rf"^(?:async )?def {name}\(", text, re.M), f"{where}: no {file}::{name}"
    asserted = _corpus([path])
    missing = [p for line in lines for part in line.split(": ")
               for p in pieces(part, 6, varying=True) if not printed(p, asserted)]
    missing = [q for p in missing for q in pieces(p.replace(", ", "\0"), 6)  # a list's items
               if not printed(q, asserted)]
    assert not missing, f"{where}: neither gg's source nor {file} holds {missing}"


def test_the_checker_catches_a_claim_gg_does_not_print():
    assert not printed("approval: zqxv", TESTS)
    assert printed("waiting: no runner that advertises os=linux can take it: m1 cannot "
                   "because it is tired")
    assert pieces("waiting: every runner that advertises LABEL is STATE") == [
        "every runner that advertises"]
    assert pieces("f_3a1c landed  3s ago", 4, varying=True) == ["landed"]
