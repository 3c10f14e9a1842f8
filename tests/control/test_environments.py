"""Charting environments, meanings in force, dispositions, the root envelope, fly refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gg.airspace.errors import AirspaceError
from gg.control import environments, flights, gates, labels, leases
from gg.domain.flight_spec import FlightSpec
from gg.domain.meanings import MeaningError
from gg.errors import BadRequest, Conflict, Forbidden

from placement_support import LINUX, charted, runner
from support import check_in

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def test_a_malformed_meaning_is_refused_with_its_position_and_nothing_is_charted(core, owner):
    with pytest.raises(MeaningError) as err:
        environments.chart(core, owner, "ui", 'os == "linux" && ')
    assert err.value.message == ("the meaning does not parse at line 1, column 17: "
                                 "expected an operand")
    assert (err.value.line, err.value.column) == (1, 17)
    assert core.store.environment("ui") is None
    assert core.store.gates(status=None) == []
    assert core.store.events(kind="info:environment") == []


def test_only_an_admin_charts(core, ada):
    with pytest.raises(Forbidden):
        environments.chart(core, ada, "ui", 'os == "linux"')
    assert core.store.environment("ui") is None


def test_a_bad_environment_name_is_refused(core, owner):
    with pytest.raises(BadRequest) as err:
        environments.chart(core, owner, "UI!", 'os == "linux"')
    assert err.value.message.startswith("environment name 'UI!': ")


def test_charting_opens_a_gate_and_the_meaning_is_in_force_only_once_it_clears(core, owner):
    r = runner(core, owner, "small", labels={"environment": "ui"}, inventory=LINUX)
    env = environments.chart(core, owner, "ui", "cpu_count >= 64")
    gate = core.store.gate(env["gate"])
    assert (gate.kind, gate.clearer, gate.guards) == ("environment", "admin", "charting environment ui")
    assert env["meaning"] is None and env["pending_meaning"] == "cpu_count >= 64"
    assert core.store.refuted_pairs(r.id) == frozenset()  # not in force: the label stays stated
    with pytest.raises(BadRequest) as err:
        flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert err.value.code == "environment_gated"
    assert err.value.message == (f"environment ui is charted but waits for gate {gate.id}; an "
                                 f"admin clears it with gg gate clear {gate.id}")
    gates.clear_gate(core, gate.id, person=owner)
    assert core.store.environment("ui").meaning == "cpu_count >= 64"
    assert core.store.refuted_pairs(r.id) == frozenset({"environment=ui"})
    assert [e["body"]["label"] for e in core.store.events(kind="warn:runner:label_refuted")] == [
        "environment=ui"]


def test_a_refuted_label_never_matches(core, owner):
    charted(core, owner, "ui", "cpu_count >= 64")
    small = runner(core, owner, "small", labels={"environment": "ui"}, inventory=LINUX)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert leases.try_claim(core, small.id) is None
    big = runner(core, owner, "big", labels={"environment": "ui"},
                 inventory={**LINUX, "cpu_count": 96})
    assert leases.try_claim(core, small.id) is None
    assert leases.try_claim(core, big.id)[0].id == f.id


def test_unknown_facts_leave_the_label_stated_and_usable(core, owner):
    charted(core, owner, "ui", "cpu_count >= 64")
    r = runner(core, owner, "quiet", labels={"environment": "ui"})  # no inventory reported
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert leases.try_claim(core, r.id)[0].id == f.id


def test_new_facts_at_check_in_recompute_the_disposition(core, owner):
    charted(core, owner, "ui", "cpu_count >= 64")
    r = runner(core, owner, "grows", labels={"environment": "ui"}, inventory=LINUX)
    assert core.store.refuted_pairs(r.id) == frozenset({"environment=ui"})
    check_in(core, r, inventory={**LINUX, "cpu_count": 128})
    assert core.store.refuted_pairs(r.id) == frozenset()
    row = next(x for x in labels.labels_view(core) if x["name"] == "grows")
    assert [(d["pair"], d["disposition"]) for d in row["labels"]] == [("environment=ui", "measured")]


def test_labels_stated_at_check_in_replace_the_registered_ones(core, owner):
    r = runner(core, owner, "r1", labels={"gpu": "a100"})
    check_in(core, r, labels={"gpu": "h100", "zone": "b"})
    assert core.store.runner(r.id).labels == {"gpu": "h100", "zone": "b"}
    assert core.store.events(kind="info:runner:labels_changed")[0]["body"]["after"] == {
        "gpu": "h100", "zone": "b"}
    with pytest.raises(BadRequest) as err:
        check_in(core, r, labels={"cpu": "idle"})
    assert "reserved for a reading" in err.value.message
    assert core.store.runner(r.id).labels == {"gpu": "h100", "zone": "b"}


def test_readings_can_never_be_required_or_advertised(core, owner):
    with pytest.raises(BadRequest):
        flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"memory_free": "8g"}))
    with pytest.raises(BadRequest):
        runner(core, owner, "r1", labels={"cpu": "8"})


def test_the_environment_is_named_with_env_not_as_a_label(core, owner):
    with pytest.raises(BadRequest) as err:
        flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"environment": "ui"}))
    assert err.value.message == "name the environment with --env NAME, not as a label"


def test_flying_in_an_environment_never_charted_points_at_chart(core, owner):
    with pytest.raises(BadRequest) as err:
        flights.open_flight(core, owner, FlightSpec(command=["true"], environment="nightly"))
    assert err.value.code == "environment_not_charted"
    assert err.value.message == ("environment nightly is not charted; an admin charts it with "
                                 "gg environment chart nightly --means PREDICATE")
    assert core.store.flights() == []


def test_re_charting_holds_waiting_flights_and_releases_them_when_it_clears(core, owner):
    charted(core, owner, "ui")
    r = runner(core, owner, "r1", labels={"environment": "ui"}, inventory=LINUX)
    waiting = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    other = flights.open_flight(core, owner, FlightSpec(command=["true"]))  # not in ui: untouched
    env = environments.chart(core, owner, "ui", 'os == "linux" && cpu_count >= 4')
    assert env["meaning"] == 'os == "linux"'  # the old meaning stays in force meanwhile
    assert core.store.flight(waiting.id).stage == "gated"
    assert core.store.flight(other.id).stage == "ready"
    assert leases.try_claim(core, r.id)[0].id == other.id
    leases.hand_back(core, r, other.id, epoch=1, outcome="landed", exit_code=0, reason=None, key="k")
    assert leases.try_claim(core, r.id) is None
    gates.clear_gate(core, env["gate"], person=owner)
    assert core.store.environment("ui").meaning == 'os == "linux" && cpu_count >= 4'
    assert core.store.flight(waiting.id).stage == "ready"
    assert leases.try_claim(core, r.id)[0].id == waiting.id


def test_charting_the_same_meaning_again_changes_nothing(core, owner):
    charted(core, owner, "ui")
    again = environments.chart(core, owner, "ui", 'os == "linux"')
    assert again["changed"] is False
    assert core.store.gates(status="open") == []


def test_a_second_chart_before_the_first_clears_supersedes_it(core, owner):
    first = environments.chart(core, owner, "ui", 'os == "linux"')
    second = environments.chart(core, owner, "ui", 'os == "darwin"')
    assert core.store.gate(first["gate"]).status == "superseded"
    gates.clear_gate(core, second["gate"], person=owner)
    assert core.store.environment("ui").meaning == 'os == "darwin"'


def test_the_root_envelope_is_refused_when_no_live_runner_advertises_an_environment(core, owner, clock):
    runner(core, owner, "r1", labels={"environment": "ui"})
    with pytest.raises(Conflict) as err:
        environments.apply_root(core, owner, {"environments": ["ui", "nightly"]})
    assert err.value.code == "environment_unserved"
    assert err.value.message == (
        "the root envelope lists environment nightly, which no live runner advertises; "
        "bring one up first (gg runner up --labels environment=nightly)")
    assert core.store.root_envelope() is None
    clock.advance(46)  # r1 goes silent: it is no longer live
    with pytest.raises(Conflict):
        environments.apply_root(core, owner, {"environments": ["ui"]})


def test_a_pool_or_other_provider_can_serve_an_environment(core, owner):
    core.wiring = replace(core.wiring, providers=(*core.wiring.providers,
                                                  lambda c, env: ["pool night-pool"]
                                                  if env == "nightly" else []))
    applied = environments.apply_root(core, owner, {"environments": ["nightly"]})
    assert applied["providers"] == {"nightly": ["pool night-pool"]}


def test_a_malformed_root_is_refused_with_its_key(core, owner):
    with pytest.raises(AirspaceError) as err:
        environments.apply_root(core, owner, {"environments": ["ui", "ui"]})
    assert err.value.message.startswith("<request>: environments")


def test_once_a_root_is_applied_only_its_environments_may_fly(core, owner):
    charted(core, owner, "ui")
    charted(core, owner, "api")
    runner(core, owner, "r1", labels={"environment": "ui"}, inventory=LINUX)
    applied = environments.apply_root(core, owner, {"environments": ["ui"]})
    assert applied["environments"] == ["ui"] and applied["not_in_force"] == []
    with pytest.raises(BadRequest) as err:
        flights.open_flight(core, owner, FlightSpec(command=["true"], environment="api"))
    assert err.value.code == "environment_not_in_root"
    assert err.value.message == ("environment api is not in the root envelope (it lists ui); "
                                 "add it to airspace/root.yaml and run gg airspace apply")
    assert flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui")).stage == "ready"


def test_environments_view_counts_advertising_measured_and_refuted(core, owner):
    charted(core, owner, "ui", "cpu_count >= 8")
    runner(core, owner, "a", labels={"environment": "ui"}, inventory=LINUX)
    runner(core, owner, "b", labels={"environment": "ui"}, inventory={**LINUX, "cpu_count": 2})
    runner(core, owner, "c", labels={"environment": "ui"})
    row = environments.environment_view(core, "ui")
    assert (row["advertising"], row["online"], row["measured"], row["refuted"]) == (3, 3, 1, 1)
    assert row["runners"] == ["a", "b", "c"] and row["gate_status"] == "cleared"


def test_a_root_refusal_names_a_runner_whose_facts_refute_the_environment(core, owner):
    charted(core, owner, "ui", "cpu_count >= 64")
    runner(core, owner, "small", labels={"environment": "ui"}, inventory=LINUX)
    with pytest.raises(Conflict) as err:
        environments.apply_root(core, owner, {"environments": ["ui"]})
    assert err.value.message.endswith(
        "(gg runner up --labels environment=ui) (small states environment=ui, but the facts "
        "refute it)")


def test_a_granted_flight_carries_its_environments_image_from_the_root(core, owner):
    """The root envelope's images: reaches the runner with the flight it is granted, and
    only for the environment that names one (an older runner keeps the field and ignores it)."""
    from gg.api.runners import Claimed
    from gg.control import answers

    charted(core, owner, "ui")
    charted(core, owner, "api")
    on_ui = runner(core, owner, "r-ui", labels={"environment": "ui"}, inventory=LINUX)
    on_api = runner(core, owner, "r-api", labels={"environment": "api"}, inventory=LINUX)
    applied = environments.apply_root(core, owner, {"environments": ["ui", "api"],
                                                    "images": {"ui": "localhost/ci/node:22"}})
    assert applied["images"] == {"ui": "localhost/ci/node:22"}
    assert environments.root_view(core)["images"] == {"ui": "localhost/ci/node:22"}
    flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    flights.open_flight(core, owner, FlightSpec(command=["true"], environment="api"))
    ui = answers.claimed(core, on_ui, leases.try_claim(core, on_ui.id))
    api = answers.claimed(core, on_api, leases.try_claim(core, on_api.id))
    assert ui is not None and api is not None
    assert ui["flight"]["image"] == "localhost/ci/node:22"
    assert Claimed.model_validate(ui).flight.image == "localhost/ci/node:22"
    assert "image" not in api["flight"]  # sent only when its environment names one
    environments.apply_root(core, owner, {"environments": ["ui", "api"]})  # images taken away
    assert environments.root_view(core)["images"] == {}


def test_a_root_image_that_is_not_an_image_reference_is_refused_with_its_key(core, owner):
    charted(core, owner, "ui")
    runner(core, owner, "r-ui", labels={"environment": "ui"}, inventory=LINUX)
    with pytest.raises(AirspaceError) as err:
        environments.apply_root(core, owner, {"environments": ["ui"],
                                              "images": {"ui": "--privileged"}})
    assert err.value.message.startswith("<request>: images.ui")
    assert core.store.root_images() == {}
