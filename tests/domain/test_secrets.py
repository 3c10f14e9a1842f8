"""The pure rules of secrets: names, the scope a flight uses, and masking output."""

import base64

import pytest

from gg.domain.secrets import (
    ALL,
    MASK,
    Masker,
    Use,
    mask,
    name_problem,
    pick,
    refusal,
    uses_problem,
)


def _through(masker: Masker, chunks: list[str]) -> str:
    return "".join(masker.feed(c) for c in chunks) + masker.rest()


def test_a_value_in_one_chunk_reads_stars():
    assert _through(Masker.of(["hunter2"]), ["pw=hunter2 ok\n"]) == f"pw={MASK} ok\n"


def test_a_value_split_across_chunks_reads_stars():
    m = Masker.of(["s3cr3t-value"])
    assert _through(m, ["a s3c", "r3t-", "value b"]) == f"a {MASK} b"


def test_a_value_split_at_every_position_reads_stars():
    value, text = "abcXYZ123", "before abcXYZ123 after abcXYZ123"
    for cut in range(len(text) + 1):
        assert _through(Masker.of([value]), [text[:cut], text[cut:]]) == \
            f"before {MASK} after {MASK}"


def test_the_base64_form_reads_stars_too():
    value = "p@ss word"
    b64 = base64.b64encode(value.encode()).decode()
    assert _through(Masker.of([value]), [f"x {b64[:5]}", f"{b64[5:]} y"]) == f"x {MASK} y"
    assert _through(Masker.of([value]), [f"{b64.rstrip('=')}\n"]) == f"{MASK}\n"


def test_output_without_a_start_of_a_value_is_not_held_back():
    m = Masker.of(["hunter2"])
    assert m.feed("plain line\n") == "plain line\n"
    assert m.feed("ends with hun") == "ends with "  # could be the start of it
    assert m.rest() == "hun"  # it was not: given at the end


def test_no_secret_passes_output_unchanged():
    m = Masker.of([])
    assert m.feed("anything") == "anything" and m.rest() == ""


def test_mask_final_holds_nothing_back():
    assert mask("", "abc hu", ["hunter2"], final=True) == ("abc hu", "")


def test_an_environments_secret_wins_over_the_one_for_every_environment():
    assert pick({ALL, "prod"}, "prod") == "prod"
    assert pick({ALL, "prod"}, "staging") == ALL
    assert pick({"prod"}, "staging") is None
    assert pick({"prod"}, None) is None


def test_a_secret_of_another_environment_is_refused_in_one_sentence():
    assert "only for flights of environment prod" in refusal("TOKEN", {"prod"}, "staging")
    assert refusal("TOKEN", set(), None).startswith("there is no secret TOKEN")
    assert refusal("TOKEN", {ALL}, None) is None


@pytest.mark.parametrize("name", ["", "1ABC", "A-B", "A B", "GG_TOKEN", "gg_x", "x" * 129])
def test_a_bad_name_is_refused(name):
    assert name_problem(name) is not None


def test_secret_use_parses_name_and_variable():
    assert Use.parse("DEPLOY_KEY") == Use("DEPLOY_KEY", "DEPLOY_KEY")
    assert Use.parse("DEPLOY_KEY=KEY") == Use("DEPLOY_KEY", "KEY")
    with pytest.raises(ValueError, match="--secret A=GG_FLIGHT"):
        Use.parse("A=GG_FLIGHT")
    with pytest.raises(ValueError):
        Use.parse("A=")


def test_two_secrets_in_one_variable_are_refused():
    assert "both go in $X" in uses_problem([Use("A", "X"), Use("B", "X")])
