"""A service's rules, pure: the restart backoff, its options, and its state read from facts."""

from __future__ import annotations

from gg.domain import services


def _fact(word, generation, epoch=1, at=0.0, **body):
    return {"epoch": epoch, "at": at, "body": {"service": word, "generation": generation, **body}}


def test_restarts_back_off_doubling_up_to_the_cap():
    assert [services.restart_delay(n, 0.5, 4.0) for n in range(0, 7)] == [
        0.0, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_bad_options_and_variables_are_refused_with_a_sentence():
    assert services.spec_problem(0, None) == "--port must be from 1 to 65535 (got 0)"
    assert services.spec_problem(8080, " ") == "--ready-cmd must not be empty"
    assert services.spec_problem(8080, "curl -f localhost:$PORT") is None
    assert "set by the runner" in services.env_problem({"PORT": "1"})
    assert "set by the runner" in services.env_problem({"GG_X": "1"})
    assert "letters, digits and _" in services.env_problem({"9A": "1"})
    assert services.env_problem({"MODE": "blue", "_X1": ""}) is None


def test_a_service_reads_ready_with_its_restarts_and_uptime_from_its_facts():
    facts = [_fact("started", 1, at=10.0), _fact("ready", 1, at=11.0),
             _fact("exited", 1, at=20.0, exit_code=-9, consecutive=1),
             _fact("started", 1, at=21.0), _fact("ready", 1, at=22.0)]
    st = services.status(facts, epoch=1, wanted=1, degraded_after=3)
    assert (st.generation, st.restarts, st.ready, st.started_at, st.last_exit, st.health,
            st.update) == (1, 1, True, 21.0, -9, "ok", None)


def test_a_crash_loop_reads_degraded_with_the_last_exit():
    facts = [_fact("started", 1)]
    for n in (1, 2, 3):
        facts += [_fact("exited", 1, exit_code=3, consecutive=n), _fact("started", 1)]
    st = services.status(facts, epoch=1, wanted=1, degraded_after=3)
    assert st.health == "degraded: exited 3 times in a row, last exit code 3"
    assert not st.ready and st.restarts == 3


def test_an_update_switches_or_reads_failed_and_older_placements_are_history():
    old = [_fact("started", 1, epoch=1), _fact("ready", 1, epoch=1)]
    now = [_fact("started", 1, epoch=2, at=5.0), _fact("ready", 1, epoch=2),
           _fact("started", 2, epoch=2, at=8.0)]
    st = services.status(old + now, epoch=2, wanted=2, degraded_after=3)
    assert (st.generation, st.ready, st.update) == (1, True, "pending: generation 2")
    failed = now + [_fact("update_failed", 2, epoch=2, reason="was not ready within 4s")]
    st = services.status(failed, epoch=2, wanted=2, degraded_after=3)
    assert (st.generation, st.ready, st.update) == (
        1, True, "failed: generation 2 was not ready within 4s")
    switched = now + [_fact("switched", 2, epoch=2, at=9.0, started_at=8.0, ready=True)]
    st = services.status(switched, epoch=2, wanted=2, degraded_after=3)
    assert (st.generation, st.ready, st.started_at, st.update) == (2, True, 8.0, None)


def test_a_placement_starts_from_the_generation_that_served_when_the_newest_never_did():
    from gg.domain import services as rules

    spec = {"generation": 1, "command": ["serve"], "env": {"A": "1"}}
    ready = rules.remember(spec, [{"body": {"service": "ready", "generation": 1}}])
    assert ready["last_ready"] == {"generation": 1, "command": ["serve"], "env": {"A": "1"}}
    assert rules.remember(ready, [{"body": {"service": "ready", "generation": 1}}]) is None
    updated = {**ready, "generation": 2, "command": ["broken"]}
    assert rules.to_start(updated)["command"] == ["broken"]  # not known to fail yet
    failed = rules.remember(updated, [{"body": {"service": "update_failed", "generation": 2}}])
    assert failed["failed"] == [2]
    start = rules.to_start(failed)
    assert (start["generation"], start["command"], start["env"]) == (1, ["serve"], {"A": "1"})


def test_service_ports_are_a_range_outside_the_kernels_own_or_refused_with_a_sentence():
    assert services.port_range(None) == services.DEFAULT_SERVICE_PORTS
    assert services.port_range("20000-20009") == (20000, 20009)
    for bad in ("20000", "9-20", "30000-20000", "a-b", "20000-70000"):
        try:
            services.port_range(bad)
        except ValueError as exc:
            assert str(exc).startswith("GG_SERVICE_PORTS must be LOW-HIGH")
        else:
            raise AssertionError(bad)
    assert services.draw_from((61000, 65535), (32768, 60999)) == [range(61000, 65536)]
    assert services.draw_from((30000, 65535), (32768, 60999)) == [range(30000, 32768),
                                                                 range(61000, 65536)]
    # all of it the kernel's: used as it is (a taken port is then only re-picked)
    assert services.draw_from((40000, 40009), (32768, 60999)) == [range(40000, 40010)]
