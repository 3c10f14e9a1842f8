"""Docs that cannot drift from what gg prints (issue 24, point 10). Read as text, no server:

- **A quoted claim**: a sentence of README.md or docs/*.md that says what gg prints, reads,
  says, shows or answers, followed by the quoted text (``reads `drained` ``, ``prints "…"``,
  ``refused with one sentence: `…` ``). Every literal piece of the quote (placeholders such
  as F, NAME, URL, ``<why>`` and ``…``, ids, digests and numbers set aside) must appear in
  gg's source, where it is produced (an f-string with example values for its ``{…}``
  counts), or in a test, where it is asserted. A JSON field list is checked against the wire
  model (JSON_FIELDS); a sample table's header against the columns gg's CLI prints.
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
    r"STATE_DIR|ID)\b|\bfile:line:|\bv\(N-1\)|\bvN\b|<[^>]*>|…|\.\.\.|\{[^}]*\}")
# What varies from run to run in sample output.
VARYING = re.compile(r"\b[a-z]{1,2}_[0-9a-z…]*|\S+-[0-9a-f]{10}\b|\S+[/.]\S+|`[^`]*`|'[^']*'"
                     r"|sha256:\S*|SHA256:\S*|(?<![\w-])\d[\d.:,%]*[a-z]*\b|\s{2,}|^\$ .*")
VERB = re.compile(
    r"\b(?:prints?|printed|reads?|says?|said|shows?|answers?|answered|ends? with|"
    r"refused with|refused|sentence|message|note|line|column|rows? reads?)"
    r"[^`\".;]{0,25}?[:,]?\s+(?:\"([^\"\n]{3,300})\"|`([^`\n]{3,300})`)")
SHELL_FENCES = ("", "sh", "bash", "shell", "console")


def _corpus(paths) -> str:
    """Source text with adjacent string literals joined (a sentence split over lines)."""
    text = "\n".join(p.read_text(errors="replace") for p in paths)
    return re.sub(r"([\"'])\s*\n\s*[rbfRBF]*([\"'])", "", text)


SOURCE = _corpus([*(ROOT / "gg").rglob("*.py"), *(ROOT / "gg").rglob("*.html"),
                  *(ROOT / "gg").rglob("*.js")])
SOURCE_LOWER = SOURCE.lower()
TESTS = _corpus(p for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__).resolve())


def _templates() -> list[list[tuple[bool, str]]]:
    """gg's f-strings as (literal?, text) parts, for a doc that quotes a sentence with example
    values where the source has a variable."""
    import ast

    def parts(node) -> list[tuple[bool, str]]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [(True, node.value)]
        if isinstance(node, ast.JoinedStr):
            return [p for v in node.values for p in parts(v)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "a" + f"{b}"
            return parts(node.left) + parts(node.right)
        return [(False, "")]

    found = []
    for path in (ROOT / "gg").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.JoinedStr, ast.BinOp)):
                found.append(parts(node))
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
    if re.fullmatch(r"GG_[A-Z_]+", piece) and piece[3:].lower() in SOURCE:
        return True  # a setting: gg/settings.py reads GG_ + its name
    if piece.lower() in SOURCE_LOWER:  # a header or a setting, spelled as its standard does
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
    "/usr /bin /sbin /lib /lib32 /lib64 /libx32 /etc": "gg/runner/isolation.py SYSTEM_PATHS",
    "grants (flight_id, epoch) PRIMARY KEY": "the table's key, gg/store/migrations.py",
    "LEASE_RENEW_AT - LEASE_MARGIN": "a formula of two settings, not output",
    "RUSAGE_CHILDREN": "a name of Python's resource module",
    "WWW-Authenticate: Bearer": "an HTTP header, gg/server/errors.py",
    "SameSite=Strict": "a cookie attribute, gg/web/guard.py samesite=\"strict\"",
    "synchronous_commit = off": "gg/store/postgres.py: SET LOCAL synchronous_commit TO OFF",
    'Remove(id, "offline while idle")': "an action of gg/domain/pool_planner.py",
    "isolation.all(i, tools.exists(t, t == i))": "a CEL expression a person writes",
    "… ; gg runner labels (build-3 states environment=ui, but the facts refute it)":
        "two parts joined with +; tests/control/test_waiting_sentences.py asserts the end",
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
        if any(w.startswith("$ ") for w in words) and not all(
                w.startswith(("$ ", "#")) for w in words):
            unknown.append(f"{where}: a transcript (commands and what they print)")
            continue
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
    shown = [line for line in lines if not line.lstrip().startswith(("$ ", "# "))]
    missing = [p for line in shown for part in line.split(": ")
               for p in pieces(part, 6, varying=True) if not printed(p, asserted)]
    missing = [q for p in missing for q in pieces(p.replace(", ", "\0"), 6)  # a list's items
               if not printed(q, asserted)]
    assert not missing, f"{where}: neither gg's source nor {file} holds {missing}"
    for line in lines:
        header = re.split(r"\s{2,}", line.strip())
        if len(header) >= 3 and all(re.fullmatch(r"[A-Z][A-Z /]*", c) for c in header):
            assert tuple(header) in TABLES, (f"{where}: gg prints no table with the columns "
                                             f"{header}")


def _tables() -> set[tuple[str, ...]]:
    """The column headers of every table gg's CLI prints (``table("NAME", "ID", …)``)."""
    import ast

    found = set()
    for path in (ROOT / "gg" / "cli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "table"
                    and all(isinstance(a, ast.Constant) for a in node.args)):
                found.add(tuple(a.value.strip() for a in node.args))
    return found


TABLES = _tables()


def test_the_checker_catches_a_claim_gg_does_not_print():
    assert not printed("approval: zqxv", TESTS)
    assert printed("waiting: no runner that advertises os=linux can take it: m1 cannot "
                   "because it is tired")
    assert pieces("waiting: every runner that advertises LABEL is STATE") == [
        "every runner that advertises"]
    assert pieces("f_3a1c landed  3s ago", 4, varying=True) == ["landed"]


# The JSON a doc promises, field by field: (doc, the text that lists the fields, the wire model
# whose fields they must be). The text must still be in the doc, and every name in it a field.
JSON_FIELDS = [
    ("docs/cli.md", "`id, stage, environment, runner, attempt, outcome,\nexit_code, waiting, "
     "opened_by`", "gg.api.flights:FlightRow"),
    ("docs/cli.md", "`title, command, requires, lease, remedy, …`", "gg.api.flights:FlightRow"),
    ("docs/cli.md", "`id, name, labels, online, state, health, ownership,\nowner, reserved, "
     "last_seen_at, version_skew`", "gg.api.runners:RunnerRow"),
    ("docs/cli.md", "`public_key_fingerprint, os, arch,\nephemeral, current_flights`",
     "gg.api.runners:RunnerRow"),
    ("docs/cli.md", "`{id, attempt, epoch, started_at, title}`", "gg.api.runners:CurrentFlight"),
    ("docs/cli.md", "`checks,\nchecks_verdict, health_notes, policy, workers, started_workers, "
     "readings`", "gg.api.runners:RunnerRow"),
    ("docs/cli.md", "adds `facts` and `attempts`", "gg.api.flights:FlightDetail"),
    ("docs/cli.md", "`expected_start_at, expected_start_low,\nexpected_start_high, "
     "expected_start_basis`", "gg.api.flights:FlightRow"),
    ("docs/cli.md", "`name, environment, members`", "gg.api.pools:Pool"),
    ("docs/cli.md", "`id, name, state,\nonline, flight, digest, resets`",
     "gg.api.pools:PoolMember"),
    ("docs/cli.md", "`last_attested_at, needs_attention`", "gg.api.pools:Pool"),
    ("docs/cli.md", "`pending: [{gate, kind, guards, why, who_may_clear, you_may_clear}]`",
     "gg.api.approvals:PendingGate"),
    ("docs/cli.md", "`{group, queued, running}`", "gg.api.groups:GroupDemand"),
    ("docs/cli.md", "`group, group_draining, group_attributes, group_exclusive`",
     "gg.api.runners:RunnerRow"),
]


@pytest.mark.parametrize("doc,text,model", JSON_FIELDS, ids=[t[:40] for _, t, _ in JSON_FIELDS])
def test_every_json_field_a_doc_lists_is_a_field_of_the_wire_model(doc, text, model):
    import importlib

    assert text in (ROOT / doc).read_text(), f"{doc} no longer says {text!r}: update this table"
    module, name = model.split(":")
    fields = getattr(importlib.import_module(module), name).model_fields
    listed = re.findall(r"[a-z_]+", re.sub(r"\badds\b|\band\b|pending:", " ", text))
    missing = [field for field in listed if field not in fields]
    assert not missing, f"{doc}: {model} has no field {missing}"
