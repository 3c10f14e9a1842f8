"""A person is passed whole, as a :class:`gg.domain.people.Person`: a scan of gg/ for the
dict it used to be (``person["name"]``, ``actor.get("role")``, ``person: dict``), so a new
use case cannot quietly take one again. The wire's JSON of a person is built in one place
(``gg.control.people.public_person``) and keeps its keys."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import gg
from gg.api.people import Person as WirePerson
from gg.control.people import public_person
from gg.domain.people import Person

GG = Path(gg.__file__).resolve().parent
# A person (or the actor of a use case) read as a dict, or annotated as one.
AS_DICT = re.compile(r"\b(person|actor)(\[|\.get\(|: dict\b)")


def dict_people(root: Path) -> list[str]:
    found = []
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.html")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if AS_DICT.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_no_person_is_a_dict_anywhere_in_gg():
    found = dict_people(GG)
    assert not found, ("pass a gg.domain.people.Person and read its attributes "
                       "(person.name, person.is_admin):\n  " + "\n  ".join(found))


def test_the_scan_finds_a_person_read_or_typed_as_a_dict(tmp_path):
    root = tmp_path / "gg"
    root.mkdir()
    (root / "x.py").write_text("def f(core, person: dict, actor: Person):\n"
                               "    return person[\"name\"], actor.get(\"role\"), person.name\n"
                               "def g(person_id: dict, persons: dict):\n    pass\n")
    assert dict_people(root) == [
        'gg/x.py:1: def f(core, person: dict, actor: Person):',
        'gg/x.py:2: return person["name"], actor.get("role"), person.name']


def test_a_persons_json_has_the_wire_keys_and_never_their_tokens_minting_time():
    person = Person(id="p_1", name="ada", role="member", created_at=1.0,
                    token_fingerprint="sha256:ab", token_minted_at=1.0)
    answer = public_person(person)
    assert list(answer) == list(WirePerson.model_fields)
    assert answer == {"id": "p_1", "name": "ada", "role": "member", "is_owner": False,
                      "created_at": 1.0, "token_fingerprint": "sha256:ab",
                      "token_expires_at": None, "removed_at": None, "removed_by": None}
    assert {f.name for f in fields(Person)} - set(answer) == {"token_minted_at"}
