"""A flight's spec: made once from the wire, written as the flight's columns and read back."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from gg.api.schemas import FlightOpen
from gg.domain import specs
from gg.domain.flight_spec import RUNS_NOTHING_NEW, FlightSpec
from gg.domain.flights import Flight, Priority, opened

RECORD = dict(id="f_1", opened_by="p_ada", opened_at=1.0)


def _settled(**changes) -> FlightSpec:
    """A spec with every field set away from its default, as open_flight leaves it."""
    spec = FlightSpec(command=("make", "test"), title="tests", environment="prod",
                      runner="r_1", labels={"gpu": "yes"}, attended=True,
                      repo="github.com/acme/app", agent="claude", timeout=60.0,
                      output_limit=1024, priority=Priority.LOW, group="edge",
                      where={"zone": "b"})
    return replace(spec, **changes)


def test_the_spec_of_an_open_is_made_from_every_field_of_the_wire_model():
    body = FlightOpen.model_validate({
        "command": ["make", "test"], "title": "tests", "environment": "prod", "runner": "ci-1",
        "labels": {"gpu": "yes"}, "attended": True, "repo": "github.com/acme/app",
        "agent": "claude", "timeout": 60, "output_limit": 1024, "priority": "low",
        "approval": True, "approver": "bob", "service": {"port": 8080}, "group": "edge",
        "where": {"zone": "b"}})
    spec = FlightSpec.from_wire(body.model_dump())
    assert spec == FlightSpec(command=("make", "test"), title="tests", environment="prod",
                              runner="ci-1", labels={"gpu": "yes"}, attended=True,
                              repo="github.com/acme/app", agent="claude", timeout=60.0,
                              output_limit=1024, priority=Priority.LOW, approval=True,
                              approver="bob",
                              service={"port": 8080, "ready_cmd": None,
                                       "socket_activation": False},
                              group="edge", where={"zone": "b"})
    # every wire field has its place in the spec: a field added to one is added to both
    assert set(FlightOpen.model_fields) == {f.name for f in fields(FlightSpec)} - {"kind"}


def test_a_spec_written_as_a_flight_s_columns_reads_back_unchanged():
    spec = _settled()
    flight = opened(spec, held=False, **RECORD)
    assert flight.requires == {"gpu": "yes", "environment": "prod"}
    assert flight.runner_target == "r_1" and flight.priority == "low"
    assert flight.spec == spec
    assert FlightSpec.from_row(flight.__dict__) == spec


def test_every_column_a_spec_writes_is_a_field_of_the_flight():
    flight_fields = {f.name for f in fields(Flight)}
    assert set(_settled().to_row()) <= flight_fields


def test_the_labels_read_back_without_the_environment_they_were_given_with():
    spec = _settled(labels={"environment": "staging", "gpu": "yes"})  # the environment wins
    back = opened(spec, held=False, **RECORD).spec
    assert back.labels == {"gpu": "yes"} and back.requires == {"gpu": "yes",
                                                                "environment": "prod"}


def test_a_spec_read_back_opens_the_same_flight_again_over_the_wire():
    spec = _settled(service=None)
    body = FlightOpen.model_validate(opened(spec, held=False, **RECORD).spec.to_wire())
    assert FlightSpec.from_wire(body.model_dump()) == spec


def test_a_service_s_settled_spec_goes_back_to_the_wire_as_its_options():
    service = {"generation": 2, "command": ["serve"], "env": {"K": "v"}, "port": 8080,
               "ready_cmd": "true", "backoff": 0.5}
    wire = _settled(service=service, kind="service", timeout=None).to_wire()
    assert wire["service"] == {"port": 8080, "ready_cmd": "true"}
    FlightOpen.model_validate(wire)


def test_a_spec_is_a_value_its_settings_cannot_be_changed_in_place():
    spec = _settled()
    with pytest.raises(AttributeError):
        spec.title = "other"  # type: ignore[misc]
    assert isinstance(spec.command, tuple)


def test_a_change_of_spec_writes_only_the_columns_it_changes():
    flight = opened(_settled(), held=False, **RECORD)
    assert _settled().row_changes(flight.__dict__) == {}
    assert _settled(command=("make", "lint")).row_changes(flight.__dict__) == {
        "command": ["make", "lint"]}


def test_a_spec_without_a_command_or_with_too_many_arguments_is_refused_in_one_sentence():
    assert FlightSpec(command=()).problem() == "a flight needs a command: gg fly -- CMD ..."
    assert "at most 4096 arguments" in FlightSpec(command=("x",) * 4097).problem()
    assert _settled().problem() is None


def test_the_digest_of_a_flight_is_the_digest_of_its_spec_as_before_specs_were_values():
    # digests approvals were given for stay valid: these were taken before FlightSpec
    flight = Flight(id="f_1", command=["make", "test"], opened_by="p_ada", opened_at=1.0,
                    environment="prod", requires={"gpu": "yes", "environment": "prod"},
                    runner_target="r_1", group="edge", where={"zone": "b"},
                    repo="github.com/acme/app", agent="shell", attended=True, timeout=60.0,
                    priority="high", output_limit=1024, title="t")
    assert specs.digest(specs.what_runs(flight)) == (
        "sha256:cff07be3ec67c9c9f74f40f52b4a4cf8ae59e118cd5cf89da698d437e8c29443")
    assert specs.what_runs(flight.spec) == specs.what_runs(flight)
    service = Flight(id="f_2", command=["serve"], opened_by="p_ada", opened_at=1.0,
                     kind="service", service={
                         "generation": 3, "command": ["serve", "--v2"], "env": {"K": "v"},
                         "port": 8080, "ready_cmd": None, "backoff": 0.5, "backoff_cap": 30.0,
                         "ready_timeout": 60.0, "stop_grace": 10.0, "degraded_after": 3})
    assert specs.digest(specs.what_runs(service)) == (
        "sha256:ee9de188b58fef6dfcbaab2d27bcff04319b1dc0de909ab71f166a1fd83feea2")


def test_a_setting_added_to_the_spec_is_in_the_approval_digest_unless_it_runs_nothing_new():
    named = set(specs.what_runs(_settled())) | set(RUNS_NOTHING_NEW) | {"labels"}
    assert named == {f.name for f in fields(FlightSpec)} | {"requires"}
    for name in RUNS_NOTHING_NEW:
        assert name not in specs.what_runs(_settled())


@pytest.mark.parametrize("note, says", [
    ("   ", "needs some text"),
    ("x" * 2001, "at most 2000 characters (2001 given)"),
    ("bell \x07", "control characters"),
    ("escape \x1b[31m", "control characters"),
    ("c1 \x9b", "control characters"),
])
def test_a_note_that_is_empty_too_long_or_holds_a_control_character_is_refused(note, says):
    assert says in FlightSpec(command=("true",), note=note).problem()


def test_a_note_of_lines_and_tabs_is_a_note_and_changes_nothing_an_approval_covers():
    spec = FlightSpec(command=("true",), note="ticket 42\n\tfor the release")
    assert spec.problem() is None
    assert "note" in RUNS_NOTHING_NEW
    assert specs.digest(specs.what_runs(spec)) == specs.digest(
        specs.what_runs(replace(spec, note=None)))


def test_each_setting_s_own_rule_is_asked_by_the_spec_s_problem():
    from gg.domain.concurrency import Concurrency
    from gg.domain.retries import Retry
    from gg.domain.secrets import Use

    ok = FlightSpec(command=("true",))
    for bad in (replace(ok, concurrency=Concurrency("has space", 1)), replace(ok, grace=-1.0),
                replace(ok, note="\x1b"), replace(ok, secrets=(Use("GG_X", "GG_X"),)),
                replace(ok, retry=Retry(retries=11))):
        assert bad.problem(), bad
    assert ok.problem() is None
