"""A flight's output is read by the flight's own thread while its process is quick: a reader
thread of its own starts only once the first flush comes with the output still open, and goes
on with the same decoder (a character split between the two readers stays whole)."""

from __future__ import annotations

import codecs
import subprocess
import time

from gg.api.runners import FlightForRunner
from gg.runner.flight import FlightRun, Lease
from gg.runner.launching import LAUNCHER


def _run(tmp_path) -> FlightRun:
    flight = FlightForRunner.model_validate({"id": "fl_reading", "command": ["true"]})
    return FlightRun(client=None, flight=flight, workspace_root=tmp_path,
                     lease=Lease(flight.id, 1, 60.0, 20.0, time.monotonic() + 60.0))


def _start(argv: list[str], tmp_path):
    return LAUNCHER.start(argv, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _decoder():
    return codecs.getincrementaldecoder("utf-8")("replace")


def test_a_quick_process_is_read_whole_by_the_flights_own_thread(tmp_path):
    run = _run(tmp_path)
    proc = _start(["/bin/sh", "-c", "printf 'one\\n'; printf 'two\\n' >&2"], tmp_path)
    assert run._read_quickly(proc, _decoder(), time.monotonic() + 600) is True
    assert "".join(run._buffer) in ("one\ntwo\n", "two\none\n")
    assert proc.wait(timeout=60) == 0


def test_output_still_open_at_the_first_flush_goes_on_in_a_reader_with_the_same_decoder(tmp_path):
    run = _run(tmp_path)
    # "é" is two bytes: the first is read here, the second only by the reader that goes on
    proc = _start(["/bin/sh", "-c", "printf 'a\\303'; while [ ! -e go ]; do sleep 0.05; done; "
                   "printf '\\251b'"], tmp_path)
    decoder = _decoder()
    deadline = time.monotonic() + 600
    while not run._buffer and time.monotonic() < deadline:  # 'a' comes; then it waits for go
        assert run._read_quickly(proc, decoder, time.monotonic() + 0.05) is False
    assert "".join(run._buffer) == "a" and proc.poll() is None
    (tmp_path / "go").touch()
    run._read_output_of(proc, decoder)  # what the reader thread runs
    assert "".join(run._buffer) == "aéb" and proc.wait(timeout=60) == 0


def test_a_flight_told_to_stop_leaves_the_reading_to_a_reader_thread(tmp_path):
    run = _run(tmp_path)
    proc = _start(["sleep", "600"], tmp_path)
    try:
        run.returning.set()  # stopping: the flight's thread must go and stop the process
        assert run._read_quickly(proc, _decoder(), time.monotonic() + 600) is False
    finally:
        proc.kill()
        proc.wait(timeout=60)
