"""The capability report is measured: real bwrap, real engine clients (stand-ins only for an
engine that cannot run here), and it never hangs."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest

from gg.domain.health import checks, judge_health
from gg.domain.policy import Policy
from gg.runner.capabilities import cgroups, probe
from gg.runner.flight_identity import Identity

KEYS = {"bwrap", "bwrap_usable", "bwrap_error", "netns", "cgroup_version", "cgroup_controllers",
        "container_engine", "container_engine_error", "tools", "isolation_levels",
        "egress_controls", "confinement", "runs_as_root", "flight_cgroups", "flight_cgroups_error",
        "flight_limits", "gvisor", "egress_allowlist_error"}


def _bin_dir(tmp_path: Path, **scripts: str) -> Path:
    """A PATH directory holding python3 (and bwrap, if the host has it) plus shell scripts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for name, body in scripts.items():
        script = bin_dir / name
        script.write_text("#!/bin/sh\n" + body + "\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_probe_reports_every_key_with_its_type():
    report = probe()
    assert set(report) == KEYS
    assert report["bwrap"] is None or os.path.isabs(report["bwrap"])
    assert isinstance(report["bwrap_usable"], bool) and isinstance(report["netns"], bool)
    assert report["cgroup_version"] in ("1", "2", "hybrid", None)
    assert report["cgroup_controllers"] == sorted(report["cgroup_controllers"])
    assert report["tools"] == sorted(report["tools"])
    assert report["container_engine"] in ("podman", "docker", None)
    assert (report["container_engine"] is None) == (report["container_engine_error"] is not None)
    assert set(report["flight_limits"]) <= {"memory", "cpu", "cpuacct", "pids"}
    assert set(report["flight_limits"].values()) <= {"v1", "v2"}


def test_levels_follow_the_measurements_and_allowlist_only_where_its_namespace_was_made():
    report = probe()
    assert report["isolation_levels"][0] == "none"
    dropped = report["confinement"]["capabilities"] == "dropped"
    assert ("sandbox" in report["isolation_levels"]) is (report["bwrap_usable"] and dropped)
    assert ("container" in report["isolation_levels"]) is bool(report["container_engine"])
    assert ("gvisor" in report["isolation_levels"]) is report["gvisor"]["usable"]
    assert ("allowlist" in report["egress_controls"]) is (report["egress_allowlist_error"]
                                                          is None)
    if os.geteuid() != 0:
        assert report["egress_allowlist_error"].endswith("root")
    assert ("none" in report["egress_controls"]) is (report["netns"]
                                                     or bool(report["container_engine"])
                                                     or report["gvisor"]["usable"])


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
def test_installed_bubblewrap_is_found_and_tried():
    report = probe()
    assert report["bwrap"] == shutil.which("bwrap")
    assert "bwrap" in report["tools"]
    if report["bwrap_usable"]:
        assert report["bwrap_error"] is None
    else:
        assert report["bwrap_error"]


def test_without_bwrap_on_path_there_is_no_sandbox_and_no_netns(tmp_path):
    report = probe(path=str(_bin_dir(tmp_path)))
    assert report["bwrap"] is None and report["bwrap_usable"] is False
    assert report["netns"] is False
    assert report["bwrap_error"] == "bwrap is not installed"
    assert report["isolation_levels"] == ["none"]
    assert report["egress_controls"] in (["all"], ["all", "allowlist"])  # nft: system dirs
    assert report["container_engine"] is None
    assert report["container_engine_error"] == "neither podman nor docker is installed"
    assert report["tools"] == ["python3"]
    assert report["gvisor"] == {"path": None, "usable": False, "error": "runsc is not installed"}


def test_a_runsc_that_cannot_run_a_flight_is_not_usable_and_says_why(tmp_path):
    bin_dir = _bin_dir(tmp_path, runsc="echo 'creating container: no cgroups here' >&2; exit 128")
    report = probe(path=str(bin_dir))
    assert report["gvisor"] == {"path": str(bin_dir / "runsc"), "usable": False,
                                "error": "creating container: no cgroups here"}
    assert "gvisor" not in report["isolation_levels"]


def test_an_engine_that_does_not_answer_is_not_reachable(tmp_path):
    bin_dir = _bin_dir(tmp_path, docker="echo 'Cannot connect to the Docker daemon' >&2; exit 1")
    report = probe(path=str(bin_dir))
    assert report["container_engine"] is None
    assert report["container_engine_error"] == "docker: Cannot connect to the Docker daemon"
    assert "docker" in report["tools"]
    assert "container" not in report["isolation_levels"]


def test_an_engine_whose_info_answers_is_reachable(tmp_path):
    bin_dir = _bin_dir(tmp_path, podman='[ "$1" = info ] && exit 0; exit 3',
                       docker="exit 1")
    report = probe(path=str(bin_dir))
    assert report["container_engine"] == "podman"
    assert report["container_engine_error"] is None
    assert "container" in report["isolation_levels"]
    assert "none" in report["egress_controls"]


def test_a_hung_engine_costs_at_most_the_engine_timeout(tmp_path):
    # The background sleep keeps stderr open: the probe must not wait for it either.
    bin_dir = _bin_dir(tmp_path, docker="sleep 60 & exec sleep 60")
    started = time.monotonic()
    report = probe(path=str(bin_dir), engine_timeout=0.5)
    assert time.monotonic() - started < 5
    assert report["container_engine"] is None
    assert report["container_engine_error"] == "docker: docker info timed out after 0.5 s"


def test_a_probe_without_an_engine_is_quick(tmp_path):
    bwrap = shutil.which("bwrap")
    bin_dir = _bin_dir(tmp_path)
    if bwrap:
        (bin_dir / "bwrap").symlink_to(bwrap)
    started = time.monotonic()
    probe(path=str(bin_dir))
    assert time.monotonic() - started < 2


def test_two_probes_of_an_unchanged_host_are_equal():
    assert probe() == probe()


def _mountinfo(*mounts: tuple[str, str, str]) -> str:
    return "\n".join(f"{i} 1 0:{i} / {point} rw,relatime shared:{i} - {fstype} cgroup {opts}"
                     for i, (point, fstype, opts) in enumerate(mounts, start=30))


def test_cgroup_v2_controllers_come_from_the_own_cgroup(tmp_path):
    own = tmp_path / "cg" / "gg.slice"
    own.mkdir(parents=True)
    (tmp_path / "cg" / "cgroup.controllers").write_text("cpu io memory pids hugetlb\n")
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    info = _mountinfo((str(tmp_path / "cg"), "cgroup2", "rw,nsdelegate"))
    assert cgroups(info, "0::/gg.slice\n") == ("2", ["cpu", "memory", "pids"])


def test_cgroup_v1_and_hybrid_hierarchies_are_read(tmp_path):
    for name in ("cpu,cpuacct", "memory", "systemd", "unified"):
        (tmp_path / name / "job").mkdir(parents=True)
    (tmp_path / "unified" / "job" / "cgroup.controllers").write_text("")
    info = _mountinfo((str(tmp_path / "cpu,cpuacct"), "cgroup", "rw,cpu,cpuacct"),
                      (str(tmp_path / "memory"), "cgroup", "rw,memory"),
                      (str(tmp_path / "systemd"), "cgroup", "rw,xattr,name=systemd"),
                      (str(tmp_path / "unified"), "cgroup2", "rw"))
    own = "3:cpu,cpuacct:/job\n2:memory:/job\n1:name=systemd:/job\n0::/job\n"
    assert cgroups(info, own) == ("hybrid", ["cpu", "cpuacct", "memory"])
    v1_only = "\n".join(info.splitlines()[:3])
    assert cgroups(v1_only, own)[0] == "1"


def test_no_cgroup_filesystem_means_no_controllers():
    assert cgroups("", "") == (None, [])


# -- confinement ------------------------------------------------------------------------------

# A bubblewrap that ignores --cap-drop and --unshare-user (what a root runner got before
# confinement was asked for) and the drop to the flight identity (setpriv up to its "--"):
# the sandbox starts, but keeps uid 0 and every capability.
_UNCONFINED_BWRAP = """skip=0
drop=0
for arg in "$@"; do
    shift
    if [ "$drop" = 1 ]; then [ "$arg" = "--" ] && drop=0; continue; fi
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case "$arg" in --cap-drop) skip=1; continue;; --unshare-user) continue;;
                   */setpriv) drop=1; continue;; esac
    set -- "$@" "$arg"
done
exec {real} "$@"
"""
# A bubblewrap that drops every capability but not root (the setpriv drop is left out): what
# a root runner's flight was before it had an identity of its own.
_ROOT_BWRAP = """drop=0
for arg in "$@"; do
    shift
    if [ "$drop" = 1 ]; then [ "$arg" = "--" ] && drop=0; continue; fi
    case "$arg" in */setpriv) drop=1; continue;; --cap-add) set -- "$@" --cap-drop; continue;;
    esac
    set -- "$@" "$arg"
done
exec {real} "$@"
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
def test_the_confinement_in_force_is_measured_inside_the_sandbox():
    report = probe()
    if not report["bwrap_usable"]:
        pytest.skip(f"a bubblewrap sandbox cannot start here ({report['bwrap_error']})")
    confinement = report["confinement"]
    assert confinement["capabilities"] == "dropped" and confinement["no_new_privs"] is True
    assert confinement["pid_namespace"] is True and confinement["layout"] == "allowlist"
    assert isinstance(confinement["user_namespace"], bool)
    assert "sandbox" in report["isolation_levels"]
    assert judge_health(Policy("sandbox", "all"), report, dev=False, started_workers=1).ok


@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0,
                    reason="needs bwrap and a root runner (whose sandbox could keep capabilities)")
def test_a_sandbox_that_keeps_capabilities_reads_degraded_naming_it(tmp_path):
    bin_dir = _bin_dir(tmp_path, bwrap=_UNCONFINED_BWRAP.format(real=shutil.which("bwrap")))
    report = probe(path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert report["bwrap"] == str(bin_dir / "bwrap")
    assert report["bwrap_usable"] is True
    assert report["confinement"]["capabilities"] == "kept"
    assert "sandbox" not in report["isolation_levels"]
    health = judge_health(Policy("sandbox", "all"), report, dev=False, started_workers=1)
    assert health.text == "degraded: the sandbox cannot drop its capabilities"


@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0,
                    reason="needs bwrap and a root runner (whose flights could run as root)")
def test_a_root_runner_whose_sandbox_keeps_uid_0_reads_degraded_flights_would_run_as_root(
        tmp_path):
    bin_dir = _bin_dir(tmp_path, bwrap=_ROOT_BWRAP.format(real=shutil.which("bwrap")))
    report = probe(path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert report["bwrap_usable"] is True and report["runs_as_root"] is True
    assert report["confinement"]["uid"] == 0
    assert report["confinement"]["capabilities"] == "dropped"
    assert "sandbox" not in report["isolation_levels"]
    health = judge_health(Policy("sandbox", "all"), report, dev=False, started_workers=1)
    assert health.text == "degraded: flights would run as root (the sandbox keeps uid 0)"


@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0,
                    reason="needs bwrap and a root runner")
def test_a_root_runners_probe_reports_the_flight_identity_and_a_read_only_proc_sys():
    report = probe(flight_identity=Identity(2_000_000_123, 2_000_000_123))
    if not report["bwrap_usable"]:
        pytest.skip(f"a bubblewrap sandbox cannot start here ({report['bwrap_error']})")
    assert report["confinement"]["uid"] == 2_000_000_123
    assert report["confinement"]["proc_sys_writable"] is False
    assert report["confinement"]["user_namespace"] is False  # root's would map to host root
    check = next(c for c in checks(Policy("sandbox", "all"), report, dev=False,
                                   started_workers=1) if c.name == "sandbox confinement")
    assert check.passed and "as uid 2000000123" in check.detail
