"""Labels: parsing, and the stated / measured / refuted dispositions of SPEC section 8."""

from __future__ import annotations

import pytest

from gg.domain.labels import (
    Disposition,
    Verdict,
    check_labels,
    dispositions,
    format_labels,
    parse_labels,
    refuted_pairs,
    requirements_met,
    usable_labels,
)

FACTS = {"os": "linux", "cpu_count": 8, "tools": ["git"]}


def linux(facts: dict) -> bool | None:
    return facts.get("os") == "linux" if "os" in facts else None


def windows(facts: dict) -> bool | None:
    return facts.get("os") == "windows" if "os" in facts else None


# -- parsing ------------------------------------------------------------------------------

def test_parse_labels_reads_comma_separated_pairs_and_forgives_spaces():
    assert parse_labels("environment=ui,gpu=a100") == {"environment": "ui", "gpu": "a100"}
    assert parse_labels(" environment=ui , gpu=a100 ") == {"environment": "ui", "gpu": "a100"}
    assert parse_labels("zone.name=eu-west_1") == {"zone.name": "eu-west_1"}


def test_an_empty_label_string_means_no_labels():
    assert parse_labels("") == {}
    assert parse_labels("  ") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("environment", "has no '='"),
        ("environment=", "empty value"),
        ("=ui", "key '' is not valid"),
        ("Environment=ui", "is not valid"),
        ("1env=ui", "is not valid"),
        ("env ironment=ui", "is not valid"),
        ("environment=ui=x", "contains a comma, '='"),
        ("environment=u i", "a space"),
        ("environment=ui,,gpu=a100", "empty item between commas"),
        ("environment=ui,", "empty item between commas"),
        ("environment=ui,environment=gpu", "given more than once"),
        ("cpu=idle", "reserved for a reading"),
        ("memory=64g", "reserved for a reading"),
        ("load=0.1", "reserved for a reading"),
        ("k" * 64 + "=v", "longer than 63 characters"),
        ("k=" + "v" * 256, "longer than 255 characters"),
    ],
)
def test_bad_labels_are_refused_with_one_plain_sentence(text, says):
    with pytest.raises(ValueError) as caught:
        parse_labels(text)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_check_labels_validates_a_mapping_from_any_source():
    assert check_labels({"gpu": "a100"}) == {"gpu": "a100"}
    with pytest.raises(ValueError, match="reserved"):
        check_labels({"cpu_percent": "3"})


def test_format_labels_is_the_sorted_inverse_of_parse_labels():
    labels = {"gpu": "a100", "environment": "ui"}
    assert format_labels(labels) == "environment=ui,gpu=a100"
    assert parse_labels(format_labels(labels)) == labels


# -- dispositions -------------------------------------------------------------------------

def test_a_label_without_a_registered_meaning_is_stated():
    [label] = dispositions({"gpu": "a100"}, {"environment=ui": linux}, FACTS)
    assert (label.key, label.value, label.disposition) == ("gpu", "a100", Disposition.STATED)
    assert "no meaning is registered for gpu=a100" in label.reason


def test_a_label_whose_meaning_the_facts_satisfy_is_measured():
    [label] = dispositions({"environment": "ui"}, {"environment=ui": linux}, FACTS)
    assert label.disposition is Disposition.MEASURED
    assert label.disposition == "measured"  # the string the CLI and API show


def test_a_label_whose_meaning_the_facts_contradict_is_refuted():
    [label] = dispositions({"environment": "win"}, {"environment=win": windows}, FACTS)
    assert label.disposition is Disposition.REFUTED
    assert "contradict" in label.reason


def test_a_meaning_is_registered_per_value_not_per_key():
    found = dispositions({"environment": "gpu"}, {"environment=ui": windows}, FACTS)
    assert found[0].disposition is Disposition.STATED


def test_unknown_is_not_refutation_so_an_undecided_meaning_leaves_the_label_stated():
    [label] = dispositions({"environment": "ui"}, {"environment=ui": linux}, {})
    assert label.disposition is Disposition.STATED
    assert "cannot decide" in label.reason


def test_a_meaning_that_raises_leaves_the_label_stated():
    def broken(facts: dict) -> bool | None:
        raise RuntimeError("boom")

    [label] = dispositions({"environment": "ui"}, {"environment=ui": broken}, FACTS)
    assert label.disposition is Disposition.STATED


def test_a_truthy_but_not_true_answer_does_not_measure_a_label():
    [label] = dispositions({"environment": "ui"}, {"environment=ui": lambda f: 1}, FACTS)
    assert label.disposition is Disposition.STATED


def test_a_meaning_that_took_too_long_refutes_the_label_and_says_so():
    [label] = dispositions({"environment": "ui"}, {"environment=ui": lambda f: Verdict.TOO_LONG},
                           FACTS)
    assert (label.disposition, label.reason) == (Disposition.REFUTED, "the meaning took too long")
    assert not label.usable and refuted_pairs([label]) == frozenset({"environment=ui"})


def test_a_verdict_not_evaluated_yet_leaves_the_label_unusable_until_it_is():
    """A parked claim woken before the verdict must not take work on unchecked facts."""
    [label] = dispositions({"environment": "ui"}, {"environment=ui": lambda f: Verdict.PENDING},
                           FACTS)
    assert label.disposition is Disposition.REFUTED and not label.usable
    assert label.reason == ("the meaning of environment=ui is being evaluated; the label is "
                            "not used until it is")


def test_dispositions_are_sorted_by_key():
    found = dispositions({"zone": "a", "environment": "ui", "gpu": "t4"}, {}, FACTS)
    assert [d.key for d in found] == ["environment", "gpu", "zone"]


def test_a_refuted_label_is_never_usable_for_matching():
    found = dispositions(
        {"environment": "win", "gpu": "a100", "zone": "eu"},
        {"environment=win": windows, "zone=eu": linux},
        FACTS,
    )
    assert usable_labels(found) == {"gpu": "a100", "zone": "eu"}
    assert refuted_pairs(found) == frozenset({"environment=win"})
    assert requirements_met({"environment": "win"}, usable_labels(found)) == ["environment=win"]


# -- requirements -------------------------------------------------------------------------

def test_requirements_met_lists_each_missing_pair_and_nothing_when_all_are_there():
    usable = {"environment": "ui", "gpu": "a100"}
    assert requirements_met({"environment": "ui"}, usable) == []
    assert requirements_met({}, usable) == []
    assert requirements_met({"gpu": "t4", "zone": "eu", "environment": "ui"}, usable) == [
        "gpu=t4", "zone=eu"]
