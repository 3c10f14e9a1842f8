"""Every waiting sentence placement can produce, from a real scenario, compared exactly.

SPEC 7's sentences 1, 2, 6 (in each state) and 7, and the gate sentence; the runners, gates
and ownership are set up through the use cases on a real store with a fake clock.
"""

from __future__ import annotations

from gg.control import environments, flights, leases, ownership
from gg.domain.flight_spec import FlightSpec

from placement_support import LINUX, charted, runner
from support import check_in


def waiting(core, flight):
    row = flights.show_flight(core, flight.id)
    return row["waiting"], row["remedy"]


def test_no_runner_advertises_the_label(core, owner):
    runner(core, owner, "r1", labels={"gpu": "h100"})
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f) == (
        "waiting: no runner advertises gpu=a100",
        "bring up a runner that advertises it (gg runner up --labels gpu=a100); gg runner labels")


def test_a_refuted_label_counts_as_not_advertised_and_the_remedy_says_why(core, owner):
    charted(core, owner, "ui", "cpu_count >= 64")
    runner(core, owner, "small", labels={"environment": "ui"}, inventory=LINUX)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    sentence, remedy = waiting(core, f)
    assert sentence == "waiting: no runner advertises environment=ui"
    assert remedy.endswith("(small states environment=ui, but the facts refute it)")


def test_every_runner_that_advertises_the_label_is_cordoned(core, owner):
    r = runner(core, owner, "r1", labels={"gpu": "a100"})
    core.store.update_runner(r.id, admin_state="cordoned")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f) == ("waiting: every runner that advertises gpu=a100 is cordoned",
                                "resume, fix, or start one")


def test_every_runner_that_advertises_the_label_is_draining(core, owner):
    r = runner(core, owner, "r1", labels={"gpu": "a100"})
    core.store.update_runner(r.id, admin_state="draining")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f)[0] == "waiting: every runner that advertises gpu=a100 is draining"


def test_every_runner_that_advertises_the_label_is_offline(core, owner, clock):
    runner(core, owner, "r1", labels={"gpu": "a100"})
    clock.advance(46)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f)[0] == "waiting: every runner that advertises gpu=a100 is offline"


def test_every_runner_that_advertises_the_label_is_degraded(core, owner):
    r = runner(core, owner, "r1", labels={"gpu": "a100"})
    core.store.update_runner(r.id, health="degraded: bwrap is missing")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f)[0] == "waiting: every runner that advertises gpu=a100 is degraded"


def test_every_runner_that_advertises_the_label_is_busy(core, owner):
    r = runner(core, owner, "r1", labels={"gpu": "a100"})
    first = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert leases.try_claim(core, r.id)[0].id == first.id
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f)[0] == "waiting: every runner that advertises gpu=a100 is busy"


def test_mixed_states_are_joined_with_or(core, owner, clock):
    busy = runner(core, owner, "busy", labels={"gpu": "a100"})
    runner(core, owner, "gone", labels={"gpu": "a100"})
    clock.advance(40)
    check_in(core, busy)
    clock.advance(10)  # "gone" last checked in 50s ago: offline; "busy" 10s ago
    flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert leases.try_claim(core, busy.id) is not None
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f)[0] == ("waiting: every runner that advertises gpu=a100 is "
                                   "offline or busy")


def test_a_runner_reserved_for_another_person_keeps_the_flight_back(core, owner, ada, bob):
    r = runner(core, owner, "adas", labels={"gpu": "a100"})
    ownership.set_ownership(core, owner, "adas", "open")
    ownership.change(core, ada, "adas", "claim")
    ownership.change(core, ada, "adas", "reserve")
    f = flights.open_flight(core, bob, FlightSpec(command=["true"], labels={"gpu": "a100"}))
    assert waiting(core, f) == (
        "waiting: a runner that could take it is reserved for another person",
        "ask its owner to release it, or bring up another runner")
    assert leases.try_claim(core, r.id) is None
    ownership.change(core, ada, "adas", "release")
    assert waiting(core, f)[0] == "waiting: runner adas can take it and will at its next claim"
    assert leases.try_claim(core, r.id)[0].id == f.id


def test_sent_to_a_runner_that_is_not_checking_in(core, owner, clock):
    runner(core, owner, "r1")
    other = runner(core, owner, "r2")
    clock.advance(46)
    check_in(core, other)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1"))
    assert waiting(core, f) == (
        "waiting: it was sent to runner r1, which is not checking in",
        "start that runner again, or open the flight without --runner")
    assert leases.try_claim(core, other.id) is None


def test_sent_to_a_runner_that_is_cordoned_names_it(core, owner):
    r = runner(core, owner, "r1")
    runner(core, owner, "r2")
    core.store.update_runner(r.id, admin_state="cordoned")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1"))
    assert waiting(core, f)[0] == "waiting: it was sent to runner r1, which is cordoned"


def test_sent_to_a_runner_that_lacks_a_required_label(core, owner):
    runner(core, owner, "r1", labels={"gpu": "h100"})
    runner(core, owner, "r2", labels={"gpu": "a100"})
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1", labels={"gpu": "a100"}))
    assert waiting(core, f)[0] == ("waiting: it was sent to runner r1, which does not "
                                   "advertise gpu=a100")


def test_a_flight_held_by_a_re_chart_names_its_gate(core, owner):
    charted(core, owner, "ui")
    runner(core, owner, "r1", labels={"environment": "ui"}, inventory=LINUX)
    env = environments.chart(core, owner, "ui", 'os == "linux" && cpu_count >= 2')
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert f.stage == "gated"
    assert waiting(core, f) == (
        f"waiting: gate {env['gate']} is open (re-charting environment ui)",
        f"an admin can clear it: gg gate clear {env['gate']}")


def test_sent_to_a_retired_runner_says_so_and_the_remedy_is_a_new_flight(core, owner):
    from gg.control import admin

    runner(core, owner, "r1")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1"))
    admin.retire(core, owner, "r1")
    sentence, remedy = waiting(core, f)
    assert sentence == "waiting: it was sent to runner r1, which is retired"
    assert remedy.startswith("cancel it (gg cancel FLIGHT) and open it again without --runner")


def test_sent_to_a_forgotten_runner_says_so_and_never_says_start_it_again(core, owner, clock):
    from gg.control import admin

    runner(core, owner, "r1")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1"))
    clock.advance(46)
    admin.forget(core, owner, "r1")
    sentence, remedy = waiting(core, f)
    assert sentence.endswith("which is no longer registered (it was forgotten)")
    assert "start that runner again" not in remedy and "gg cancel" in remedy


def test_a_maintain_only_runner_does_not_serve_its_environment(core, owner):
    charted(core, owner, "ui")
    m = runner(core, owner, "keeper", labels={"environment": "ui"}, inventory=LINUX)
    core.store.update_runner(m.id, profile_in_force={"roles": ["maintain"], "environment": "ui"})
    assert environments.live_runners(core, "ui") == []
    row = next(e for e in environments.environments_view(core) if e["name"] == "ui")
    assert row["runners"] == [] and row["advertising"] == 0
    flier = runner(core, owner, "flier", labels={"environment": "ui"}, inventory=LINUX)
    core.store.update_runner(flier.id, profile_in_force={"roles": ["runner", "maintain"]})
    assert environments.live_runners(core, "ui") == ["runner flier"]
