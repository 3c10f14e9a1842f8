"""Environment meanings: refused with a position when wrong, evaluated without raising."""

from __future__ import annotations

import threading
import time

import pytest

from gg.control.cel import compile_meaning
from gg.domain.meanings import FACT_TYPES, MeaningError, facts_from_inventory
from gg.errors import BadRequest


def build_host_facts(**changes) -> dict:
    inventory = {
        "hostname": "build-7", "os": "Linux", "arch": "x86_64", "cpu_count": 8,
        "memory_total": 16 * 2**30, "python": "3.11.7", "gg_version": "0.1.0",
        "addresses": ["10.0.0.7", "fe80::1"],
    }
    capabilities = {"tools": ["git", "bwrap", "podman"], "isolation_levels": ["none", "sandbox"],
                    "container_engine": "podman"}
    labels = {"gpu": "a100", "environment": "ui"}
    for key, value in changes.items():
        target = capabilities if key in capabilities else labels if key == "labels" else inventory
        if key == "labels":
            labels = value
        elif value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return facts_from_inventory(inventory, capabilities, labels)


# -- refused when charted -----------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "line", "column", "says"),
    [
        ('os == "linux" && ', 1, 17, "expected an operand"),
        ("cpu_count >= >= 4", 1, 14, "unexpected '>='"),
        ('os ==\n  "linux" && )', 2, 14, "unexpected ')'"),
        ('(os == "linux"', 1, 15, "expected ')'"),
        ('os == "linux")', 1, 14, "nothing is open"),
        ('os == "linux', 1, 7, "a string is not closed"),
        ('os = "linux"', 1, 4, "use =="),
        ("cpu_count >= 4 & tools", 1, 16, "use &&"),
        ('os == "linux" x', 1, 15, "expected an operator or the end of the meaning"),
    ],
)
def test_a_malformed_meaning_is_refused_with_its_line_and_column(text, line, column, says):
    with pytest.raises(MeaningError) as caught:
        compile_meaning(text)
    error = caught.value
    assert (error.line, error.column) == (line, column)
    assert str(error).startswith(f"the meaning does not parse at line {line}, column {column}: ")
    assert says in str(error)


def test_a_parse_error_is_one_plain_sentence_without_a_celpy_dump():
    with pytest.raises(MeaningError) as caught:
        compile_meaning('os == "linux" && ')
    message = str(caught.value)
    assert message == "the meaning does not parse at line 1, column 17: expected an operand"
    assert "\n" not in message and "Token" not in message and "celpy" not in message


def test_a_meaning_error_is_a_bad_request_so_the_server_answers_400():
    with pytest.raises(BadRequest) as caught:
        compile_meaning("cpu_count >=")
    assert caught.value.status == 400 and caught.value.code == "invalid_meaning"


def test_an_unknown_fact_is_refused_with_its_position_and_a_suggestion():
    with pytest.raises(MeaningError) as caught:
        compile_meaning('os == "linux" && cpu_cuont >= 4')
    error = caught.value
    assert (error.line, error.column) == (1, 18)
    assert "unknown fact cpu_cuont" in str(error)
    assert "did you mean cpu_count?" in str(error)


def test_an_unknown_fact_inside_a_macro_is_refused_but_the_macro_variable_is_not():
    compile_meaning('tools.exists(t, t == "git")')
    with pytest.raises(MeaningError, match="unknown fact toolz"):
        compile_meaning('tools.exists(t, t == toolz)')


def test_an_unknown_function_is_refused():
    with pytest.raises(MeaningError, match=r"unknown function sise\(\)"):
        compile_meaning("sise(tools) > 1")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cpu_count", "the meaning gives an int, not true or false"),
        ("os", "the meaning gives a string, not true or false"),
        ("cpu_count + 1", "the meaning gives an int"),
        ('cpu_count > 1 ? "a" : "b"', "the meaning gives a string"),
    ],
)
def test_a_meaning_that_is_not_true_or_false_is_refused_when_it_can_be_known(text, says):
    with pytest.raises(MeaningError, match=says):
        compile_meaning(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('cpu_count == "8"', "compares an int with a string"),
        ("cpu_count >= 4.0", "numbers must be of the same kind"),
        ("memory_gb >= 16", "write 16.0 for a double"),
        ("4 in tools", "'in' looks for an int"),
        ('cpu_count && os == "linux"', "each side of && must be true or false"),
        ('os.version == "1"', "a string has no field version"),
    ],
)
def test_a_comparison_that_could_never_work_is_refused(text, says):
    with pytest.raises(MeaningError, match=says):
        compile_meaning(text)


def test_an_empty_meaning_is_refused():
    with pytest.raises(MeaningError, match="the meaning is empty"):
        compile_meaning("   ")


# -- evaluated ----------------------------------------------------------------------------

def test_facts_from_inventory_gives_every_documented_fact_with_its_type():
    facts = build_host_facts()
    assert set(facts) == set(FACT_TYPES)
    assert facts["os"] == "linux"  # lower-cased: platform.system() says "Linux"
    assert facts["memory"] == 16 * 2**30 and facts["memory_gb"] == 16.0
    assert facts["tools"] == ["bwrap", "git", "podman"]
    assert facts["isolation"] == ["none", "sandbox"]
    assert facts["labels"] == {"gpu": "a100", "environment": "ui"}


def test_a_missing_or_ill_typed_inventory_key_gives_no_fact_rather_than_a_default():
    facts = facts_from_inventory({"cpu_count": "eight", "os": "linux"}, {}, None)
    assert "cpu_count" not in facts and "tools" not in facts and "container_engine" not in facts
    assert facts == {"os": "linux", "labels": {}}


def test_a_good_meaning_is_true_on_a_host_that_meets_it_and_false_on_one_that_does_not():
    meaning = compile_meaning('os == "linux" && cpu_count >= 4 && memory_gb >= 8.0')
    assert meaning.evaluate(build_host_facts()) is True
    assert meaning.evaluate(build_host_facts(cpu_count=2)) is False
    assert meaning.evaluate(build_host_facts(os="Darwin")) is False
    assert meaning.facts_used == frozenset({"os", "cpu_count", "memory_gb"})


def test_a_tool_and_cpu_requirement_reads_the_capability_report():
    meaning = compile_meaning('"git" in tools && cpu_count >= 4')
    assert meaning.evaluate(build_host_facts()) is True
    assert meaning.evaluate(build_host_facts(tools=["bwrap"])) is False


def test_a_stated_label_can_be_read_through_the_labels_map():
    meaning = compile_meaning('labels["gpu"] == "a100"')
    assert meaning.evaluate(build_host_facts()) is True
    assert meaning.evaluate(build_host_facts(labels={"gpu": "t4"})) is False
    assert compile_meaning('labels.gpu == "a100"').evaluate(build_host_facts()) is True


def test_a_label_the_runner_does_not_state_is_unknown_unless_the_meaning_asks_for_it():
    absent = build_host_facts(labels={})
    assert compile_meaning('labels["gpu"] == "a100"').evaluate(absent) is None
    assert compile_meaning('"gpu" in labels && labels["gpu"] == "a100"').evaluate(absent) is False
    assert compile_meaning("has(labels.gpu)").evaluate(absent) is False


def test_macros_string_functions_and_ternaries_evaluate():
    facts = build_host_facts()
    for text in ('tools.exists(t, t.startsWith("pod"))', "size(tools) >= 3",
                 'os.matches("^lin")', 'container_engine != ""', '"sandbox" in isolation',
                 'tools.all(t, size(t) > 2)', 'cpu_count > 2 ? os == "linux" : false',
                 "memory >= 8 * 1024 * 1024 * 1024", 'addresses.exists(a, a.startsWith("10."))'):
        assert compile_meaning(text).evaluate(facts) is True, text


def test_evaluation_never_raises_and_gives_none_when_the_facts_cannot_decide():
    meaning = compile_meaning('"git" in tools && cpu_count >= 4')
    assert meaning.evaluate({}) is None
    assert meaning.evaluate({"tools": ["git"], "cpu_count": "eight"}) is None
    assert meaning.evaluate({"tools": None, "cpu_count": 8}) is None
    assert meaning.evaluate({"tools": [object()], "cpu_count": 8}) is None
    assert compile_meaning("1 / 0 == 1").evaluate({}) is None


def test_false_short_circuits_an_undecidable_side():
    meaning = compile_meaning('os == "windows" && cpu_count >= 4')
    assert meaning.evaluate({"os": "linux"}) is False


def test_a_meaning_is_a_callable_as_label_dispositions_expect():
    meaning = compile_meaning('os == "linux"')
    assert meaning(build_host_facts()) is True


def test_concurrent_evaluation_gives_each_caller_its_own_answer():
    meaning = compile_meaning("cpu_count >= 4")
    wrong: list[int] = []

    def check(n: int) -> None:
        for _ in range(200):
            if meaning.evaluate({"cpu_count": n}) is not (n >= 4):
                wrong.append(n)

    threads = [threading.Thread(target=check, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_one_meaning_evaluates_against_a_thousand_runners_quickly():
    meaning = compile_meaning('os == "linux" && cpu_count >= 4 && "git" in tools '
                              '&& labels["gpu"] == "a100"')
    fleet = [build_host_facts(cpu_count=n % 16) for n in range(1000)]
    started = time.perf_counter()
    answers = [meaning.evaluate(facts) for facts in fleet]
    elapsed = time.perf_counter() - started
    assert answers == [n % 16 >= 4 for n in range(1000)]
    assert elapsed < 5.0, f"1,000 evaluations took {elapsed:.2f}s"


# -- cost ---------------------------------------------------------------------------------

def _forty() -> str:
    return "[" + ",".join(str(n) for n in range(40)) + "]"


def test_the_nested_comprehension_that_stalled_the_server_is_refused_with_its_position():
    # Three nested .all() over 40-element lists, under 400 characters: 64,000 conditions.
    text = (f"{_forty()}.all(a, {_forty()}.all(b, {_forty()}.all(c, "
            f"a + b + c >= 0)))")
    assert len(text) < 400
    inner = text.index("all(b")
    with pytest.raises(MeaningError) as caught:
        compile_meaning(text)
    error = caught.value
    assert (error.line, error.column) == (1, inner + 1)
    assert str(error) == (f"the meaning puts all() inside the condition of all() at line 1, "
                          f"column {inner + 1}; a comprehension inside another is refused "
                          f"because its cost multiplies")


@pytest.mark.parametrize("inner", ['tools.exists(t, t == "git")', 'tools.map(t, t)[0] == "x"',
                                   'tools.filter(t, t == "git").size() > 0',
                                   'tools.exists_one(t, t == "git")'])
def test_any_comprehension_in_another_s_condition_is_refused(inner):
    with pytest.raises(MeaningError, match=r"inside the condition of all\(\)"):
        compile_meaning(f"isolation.all(i, {inner})")


def test_a_large_literal_list_that_puts_the_cost_over_the_limit_is_refused_with_its_position():
    big = "[" + ",".join(f'"t{n}"' for n in range(300)) + "]"
    text = f"tools.exists(t, t in {big})"  # 64 assumed tools times 300: over 10,000
    with pytest.raises(MeaningError) as caught:
        compile_meaning(text)
    error = caught.value
    assert (error.line, error.column) == (1, 7)  # the comprehension that multiplies
    assert str(error).startswith("the meaning may cost up to ")
    assert str(error).endswith(", more than the limit of 10000 (GG_MEANING_COST_LIMIT), most "
                               "of them at line 1, column 7")
    assert "\n" not in str(error)


def test_the_cost_limit_is_a_parameter_and_a_cheaper_meaning_passes_it():
    text = 'cpu_count in [' + ",".join(str(n) for n in range(500)) + "]"
    assert compile_meaning(text).cost > 500
    with pytest.raises(MeaningError, match="more than the limit of 100 "):
        compile_meaning(text, cost_limit=100)


@pytest.mark.parametrize("text", [
    'os == "linux" && cpu_count >= 4 && "git" in tools',
    'tools.exists(t, t == "git") && isolation.exists(i, i == "sandbox")',
    'labels["gpu"] == "a100" && memory_gb >= 8.0',
    'hostname.matches("^build-[0-9]+$") || hostname.startsWith("ci-")',
    'tools.filter(t, t.startsWith("py")).map(t, t).size() >= 1',
])
def test_ordinary_meanings_are_accepted_well_under_the_limit(text):
    assert compile_meaning(text).cost < 1000


def test_the_rules_of_a_meaning_are_pure_and_cel_stays_in_its_adapter():
    import subprocess
    import sys

    script = ("import sys; import gg.domain.meanings; "
              "print(sorted(m for m in ('celpy', 'lark') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_server_loads_cel_only_when_a_meaning_is_first_compiled():
    """celpy and lark cost a server's start about a fifth of its CPU; every start paid it,
    while only charting or reading a meaning needs them (the meaning worker loads its own)."""
    import subprocess
    import sys

    script = ("import sys; import gg.server.app, gg.cli.server; "
              "print(sorted(m for m in ('celpy', 'lark') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_meaning_built_from_any_evaluator_never_raises_and_answers_only_booleans():
    from gg.domain.meanings import Meaning

    def boom(facts):
        raise ValueError(facts)

    reads = []
    meaning = Meaning("os == x", frozenset({"os"}), lambda facts: reads.append(facts) or True)
    assert meaning({"os": "linux", "arch": "arm64"}) is True
    assert reads == [{"os": "linux"}]  # only the facts it reads
    assert Meaning("x", frozenset(), boom)({}) is None
    assert Meaning("x", frozenset(), lambda facts: 1)({}) is None  # not a boolean: undecided
