"""A flights file read into the bodies ``gg fly`` would send, by ``gg fly``'s own flags,
and every mistake in it located at file:line:key (gg.airspace.flights_file,
gg.cli.flights_file; docs/work-graphs.md). No server: nothing here is sent."""

from __future__ import annotations

import pytest

from gg.airspace.errors import AirspaceError
from gg.cli.app import load
from gg.cli.flights_file import bodies_of, option_keys

FLY = load("fly")
OPTIONS = option_keys(FLY)


def bodies(tmp_path, text: str) -> list[dict]:
    path = tmp_path / "flights.yaml"
    path.write_text(text)
    return bodies_of(path, FLY)


def refusal(tmp_path, text: str) -> str:
    with pytest.raises(AirspaceError) as refused:
        bodies(tmp_path, text)
    return str(refused.value).removeprefix(str(tmp_path / "flights.yaml") + ":")


def test_every_key_is_read_as_the_flag_of_its_name_reads_it(tmp_path):
    got = bodies(tmp_path, """\
flights:
  build:
    command: [make, -j, 4]
    timeout: 10m
    labels: {os: linux, arch: amd64}
    cpus: 2
    memory: 512M
    concurrency: builds:2
    grace: 30s
    priority: low
    attended: false
  test:
    command: [make, test]
    needs: build
    env: staging
    attended: true
    after-any: true
""")
    build, test = got
    assert build == {**build, "name": "build", "needs": [], "command": ["make", "-j", "4"],
                     "timeout": 600.0, "labels": {"os": "linux", "arch": "amd64"},
                     "priority": "low", "grace": 30.0, "attended": False,
                     "concurrency": {"key": "builds", "limit": 2, "cancel_in_progress": False}}
    assert build["limits"]["cpus"] == 2 and build["limits"]["memory"] == 512 * 1024 ** 2
    assert (test["needs"], test["environment"], test["attended"], test["after_any"]) == (
        ["build"], "staging", True, True)
    assert "wait" not in OPTIONS and "json" not in OPTIONS and "file" not in OPTIONS


@pytest.mark.parametrize(("line", "where"), [
    ("timeout: soon", "4: flights.build.timeout: 'soon' is not a duration (try 30, 500ms, "
                      "10m, 12h or 30d)"),
    ("attended: 3", "4: flights.build.attended: must be true or false (got 3)"),
    ("priority: urgent", "4: flights.build.priority: --priority must be one of high, normal, "
                         "low (got 'urgent')"),
    ("port: 80", "4: flights.build.port: --port, --ready-cmd and --socket-activation are for "
                 "a service: add --service"),
    ("wait: true", "4: flights.build.wait: is no key of a flight: gg fly --file does not "
                   "follow its flights (gg flights --graph F shows them)"),
    ("timout: 10m", "4: flights.build.timout: is not a known key (did you mean timeout?)"),
    ("needs: [nope]", "4: flights.build.needs[0]: no flight 'nope' in this file (its flights "
                      "are build, publish)"),
    ("needs: [publish]", "4: flights.build.needs: needs go round in a cycle (build -> publish "
                         "-> build): no flight of it could ever start"),
    ("needs: build", "4: flights.build.needs: build needs itself: a flight cannot run after "
                     "itself"),
    ("command: make", "3: flights.build.command: must be a list of its words, as after gg fly "
                      "-- (e.g. [make, test]; got \"make\")"),
])
def test_a_bad_key_is_refused_in_one_sentence_at_its_file_line_and_key(tmp_path, line, where):
    text = f"flights:\n  build:\n    command: [make]\n    {line}\n" \
           "  publish:\n    command: [echo]\n    needs: build\n"
    if line.startswith("command:"):
        text = f"flights:\n  build:\n    {line}\n  publish:\n    command: [echo]\n"
    assert refusal(tmp_path, text) == where


def test_a_file_without_flights_or_with_a_bad_name_is_refused_at_its_line(tmp_path):
    assert refusal(tmp_path, "jobs: {}\n") == (
        "1: flights: is required")
    assert refusal(tmp_path, "flights:\n  -x:\n    command: [true]\n").startswith(
        "2: flights.-x: a flight's name is letters, digits")
