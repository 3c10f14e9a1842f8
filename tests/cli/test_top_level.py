"""The top level reads like the rest: a typo gets a suggestion although commands load lazily,
and ``--show-completion SHELL`` prints that shell's script (issue 24, point 9)."""

from __future__ import annotations

import subprocess

import pytest

from gg.launch import gg_argv


def gg(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(gg_argv(*args), capture_output=True, text=True, timeout=60)


def test_a_top_level_typo_is_told_the_command_it_meant():
    done = gg("fligths")
    assert done.returncode == 2
    assert done.stderr.strip() == "gg: No such command 'fligths'. Did you mean 'flights'?"
    assert "Traceback" not in done.stderr


def test_a_word_like_no_command_gets_no_suggestion():
    done = gg("zzzzqqq")
    assert done.returncode == 2
    assert "Did you mean" not in done.stderr


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o default -F"),
                                          ("zsh", "#compdef gg"),
                                          ("fish", "complete --command gg")])
def test_show_completion_prints_the_named_shells_script(shell, marker):
    done = gg("--show-completion", shell)
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout
    assert "_GG_COMPLETE" in done.stdout


def test_show_completion_refuses_a_shell_it_does_not_know():
    done = gg("--show-completion", "tcsh")
    assert done.returncode == 2
    assert done.stderr.strip() == ("--show-completion takes one of bash, zsh, fish, powershell, "
                                   "pwsh (got 'tcsh')")


def test_an_expired_gg_token_names_the_variable_instead_of_gg_login(fleet):
    done = fleet.gg("flights", token="ggp_" + "x" * 40)
    assert done.returncode == 3
    assert done.stderr.strip() == (
        "the token in GG_TOKEN was not accepted (it may have expired or been rotated, or its "
        "person removed): set GG_TOKEN to a live token, or unset it to use the sign-in gg "
        "login keeps")


def test_event_and_fact_words_read_as_people_read_them():
    import time

    from gg.cli.context import words

    assert words({}) == ""
    at = 1803000000
    assert words({"token_expires_at": at, "n": 3, "sub": {}}) == (
        f'token_expires_at="{time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))}" n=3 sub=-')


def test_an_uptime_reads_with_one_decimal():
    from gg.domain.timeouts import describe

    assert describe(5.34274) == "5.3s"
    assert describe(0.25) == "250ms"


def test_a_truncation_note_starts_on_a_line_of_its_own_and_stdout_stays_exact(capsys):
    from gg.api.flights import FlightFact
    from gg.cli.flights import _echo_fact

    def fact(seq, kind, body):
        return FlightFact(seq=seq, flight_id="f_1", epoch=1, runner_id="r_1", kind=kind,
                          body=body, at=0.0)

    _echo_fact(fact(1, "output", {"text": "0123456789abcdef\n0123"}))
    _echo_fact(fact(2, "note", {"text": "output truncated after 22 bytes",
                                "truncated_after": 22}))
    out, err = capsys.readouterr()
    assert out == "0123456789abcdef\n0123"
    assert err == "\n-- output truncated after 22 bytes\n"
    _echo_fact(fact(3, "output", {"text": "whole line\n"}))
    _echo_fact(fact(4, "note", {"text": "again", "truncated_after": 1}))
    assert capsys.readouterr().err == "-- again\n"
