"""Verdicts of meanings: a worker process under a deadline, a cache per facts, never the loop."""

from __future__ import annotations

import asyncio
import os
import resource

import pytest

from gg.control import labels
from gg.control.cel import compile_meaning
from gg.control.verdicts import Verdicts
from gg.domain.labels import Verdict
from gg.settings import Settings

from placement_support import LINUX, charted, runner
from support import check_in

# Within the static cost bound (it assumes 64 tools), yet slow for a runner that reports
# eight thousand: celpy spends about 0.3 ms on each, so seconds in all.
WIDE = ('tools.all(t, size(t) < 100 && !t.startsWith("-") && !t.endsWith("~") && '
        '!t.contains("//") && t != "x" && t.matches("^[a-z0-9-]+$"))')
MANY_TOOLS = [f"tool-{n:06d}" for n in range(8_000)]


def test_a_meaning_over_the_deadline_reads_too_long_and_the_next_one_still_answers():
    meaning = compile_meaning(WIDE)
    assert meaning.cost <= Settings().meaning_cost_limit
    hurried = Verdicts(deadline=0.05)
    assert hurried.decide(meaning, {"tools": MANY_TOOLS}) is Verdict.TOO_LONG
    # The overrunning worker was killed; a replacement answers (a patient deadline: the
    # machine may be loaded, and only the overrun is under test here).
    patient = Verdicts(deadline=30.0)
    assert patient.decide(meaning, {"tools": ["git", "-x"]}) is False
    assert patient.decide(meaning, {"tools": ["git"]}) is True
    assert patient.decide(compile_meaning("1 / 0 == 1"), {}) is None


def test_a_worker_answers_a_server_whose_descriptors_run_past_a_thousand_and_twenty_four():
    """A server holding thousands of connections starts its meaning worker with pipes
    numbered past 1024, which select() refuses: the wait is poll's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine's hard limit of open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1100:  # every lower number taken: the pipes go past
            held.append(os.open(os.devnull, os.O_RDONLY))
        verdicts = Verdicts(deadline=30.0)
        assert verdicts.decide(compile_meaning('"git" in tools'), {"tools": ["git"]}) is True
        assert verdicts.decide(compile_meaning('"git" in tools'), {"tools": []}) is False
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("settings", [Settings(dev=True, meaning_deadline=0.05)],
                         ids=["a deadline of 50 ms"])
def test_a_slow_meaning_refutes_the_label_with_took_too_long(core, owner):
    charted(core, owner, "wide", WIDE)
    r = runner(core, owner, "wide-1", labels={"environment": "wide"}, inventory=LINUX)
    check_in(core, r, capabilities={"tools": MANY_TOOLS})
    row = next(x for x in labels.labels_view(core) if x["name"] == "wide-1")
    assert [(d["pair"], d["disposition"], d["reason"]) for d in row["labels"]] == [
        ("environment=wide", "refuted", "the meaning took too long")]
    assert core.store.refuted_pairs(r.id) == frozenset({"environment=wide"})
    [event] = core.store.events(kind="warn:runner:label_refuted")
    assert event["body"]["reason"] == ("the meaning of environment=wide took too long on the "
                                       "facts of runner wide-1")


def test_verdicts_are_cached_per_meaning_and_the_facts_it_reads():
    verdicts = Verdicts(deadline=30.0)
    meaning = compile_meaning('"git" in tools && cpu_count >= 4')
    facts = {"tools": ["git"], "cpu_count": 8, "hostname": "a"}
    assert verdicts.decide(meaning, facts) is True
    assert verdicts.decide(meaning, dict(facts)) is True
    assert verdicts.decide(meaning, facts | {"hostname": "b"}) is True  # a fact it never reads
    assert verdicts.evaluations == 1
    assert verdicts.decide(meaning, facts | {"cpu_count": 2}) is False
    assert verdicts.decide(compile_meaning("cpu_count >= 4"), facts) is True  # another meaning
    assert verdicts.evaluations == 3


def test_the_cache_is_bounded_and_forgets_the_least_recently_used():
    verdicts = Verdicts(deadline=30.0, size=2)
    meaning = compile_meaning("cpu_count >= 4")
    for n in (1, 2, 1, 3):  # 1 is used again, so 2 is the one forgotten when 3 comes
        verdicts.decide(meaning, {"cpu_count": n})
    assert verdicts.evaluations == 3
    verdicts.decide(meaning, {"cpu_count": 1})
    assert verdicts.evaluations == 3
    verdicts.decide(meaning, {"cpu_count": 2})
    assert verdicts.evaluations == 4


def test_a_too_long_verdict_is_cached_too():
    verdicts = Verdicts(deadline=0.05)
    meaning = compile_meaning(WIDE)
    assert verdicts.decide(meaning, {"tools": MANY_TOOLS}) is Verdict.TOO_LONG
    assert verdicts.decide(meaning, {"tools": MANY_TOOLS}) is Verdict.TOO_LONG
    assert verdicts.evaluations == 1


def test_on_the_event_loop_a_miss_never_evaluates_it_is_pending_until_evaluated_off_it():
    verdicts = Verdicts(deadline=30.0)
    meaning = compile_meaning("cpu_count >= 4")

    async def main():
        assert verdicts.decide(meaning, {"cpu_count": 8}) is Verdict.PENDING
        assert verdicts.evaluations == 0
        assert await verdicts.evaluate(meaning, {"cpu_count": 8}) is True
        assert verdicts.decide(meaning, {"cpu_count": 8}) is True

    asyncio.run(main())
    assert verdicts.evaluations == 1


@pytest.fixture
def settings():
    return Settings(dev=True)


def test_a_check_in_on_the_loop_stores_unusable_then_settles_to_the_verdict(core, owner):
    charted(core, owner, "big", "cpu_count >= 64")  # no runner yet: nothing evaluated
    r = runner(core, owner, "small", labels={"environment": "big"})

    async def main():
        check_in(core, r, inventory=LINUX)
        [before] = core.store.dispositions_of(r.id)["dispositions"]
        assert (before["disposition"], before["reason"]) == (
            "refuted", "the meaning of environment=big is being evaluated; the label is not "
                       "used until it is")
        assert not core.store.events(kind="warn:runner:label_refuted")
        assert await labels.settled(core, r.id) is True
        [after] = core.store.dispositions_of(r.id)["dispositions"]
        assert after["disposition"] == "refuted"
        assert await labels.settled(core, r.id) is False  # nothing left to wait for

    asyncio.run(main())
    assert core.store.refuted_pairs(r.id) == frozenset({"environment=big"})


def test_new_facts_keep_the_last_verdict_until_theirs_is_in(core, owner):
    charted(core, owner, "big", "cpu_count >= 64")
    r = runner(core, owner, "grows", labels={"environment": "big"}, inventory=LINUX)
    assert core.store.refuted_pairs(r.id) == frozenset({"environment=big"})  # 8 CPUs

    async def main():
        check_in(core, r, inventory=LINUX | {"cpu_count": 128})
        # Not checked yet: still refuted (never usable on unchecked facts), not stated.
        assert core.store.refuted_pairs(r.id) == frozenset({"environment=big"})
        assert await labels.settled(core, r.id) is True
        [after] = core.store.dispositions_of(r.id)["dispositions"]
        assert after["disposition"] == "measured"

    asyncio.run(main())
    assert core.store.refuted_pairs(r.id) == frozenset()
