"""``gg airspace check``: every problem as file:line: key: problem, non-zero when any."""

from __future__ import annotations

import os
import subprocess

from gg.launch import gg_argv

from support import lay_out


def gg(*args: str, cwd=None, env=None):
    return subprocess.run(gg_argv(*args), capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, **(env or {})})


def test_every_problem_is_printed_with_file_line_and_key(tmp_path):
    base = lay_out(tmp_path / "airspace", {
        "root.yaml": "environments: [ui]\n",
        "fleet/ui.yaml": "purpose: p\nroles: [runner]\nenvironment: ui\npolicy:\n  wrokers: 2\n",
        "fleet/api.yaml": "purpose: p\nroles: [runner]\nenvironment: api\n",
    })
    done = gg("airspace", "check", "--airspace", str(base))
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"{base}/fleet/api.yaml:3: environment: api is not listed")
    assert lines[1] == (f"{base}/fleet/ui.yaml:5: policy.wrokers: is not a known key "
                        "(did you mean workers?)")
    assert lines[2] == f"2 problems in {base}"
    assert done.stdout == ""


def test_a_good_airspace_is_found_from_gg_airspace_or_the_working_directory(tmp_path):
    base = lay_out(tmp_path / "airspace", {
        "root.yaml": "environments: [ui]\n",
        "fleet/ui.yaml": "purpose: p\nroles: [runner]\nenvironment: ui\n",
    })
    here = gg("airspace", "check", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    assert "1 fleet profile(s)" in here.stdout
    named = gg("airspace", "check", env={"GG_AIRSPACE": str(base)})
    assert named.returncode == 0, named.stderr
    missing = gg("airspace", "check", "--airspace", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "is not a directory" in missing.stderr


DEEP = "[" * 10_000  # PyYAML composes recursively: this once ended in a RecursionError


def test_a_deeply_nested_file_of_every_kind_is_one_located_sentence(tmp_path):
    from gg.airspace.yamlfile import MAX_DEPTH

    env = {"GG_CONFIG_DIR": str(tmp_path / "config"), "GG_SERVER": "http://127.0.0.1:9"}
    said = f"nests deeper than {MAX_DEPTH} levels; airspace files are shallow"
    for rel, command in (("root.yaml", ("airspace", "apply")),
                         ("fleet/ui.yaml", ("fleet", "apply", "ui")),
                         ("strategies/ui.yaml", ("strategy", "apply", "ui"))):
        base = tmp_path / rel.replace("/", "-")
        lay_out(base, {rel: "purpose: p\nnested:\n  deep: " + DEEP + "\n"})
        path = base / rel
        checked = gg("airspace", "check", "--airspace", str(base), env=env)
        assert checked.returncode == 1 and checked.stdout == ""
        assert checked.stderr == f"{path}:3: {said}\n1 problem in {base}\n"
        args = (*command, str(path)) if command[0] == "strategy" else (*command, "--airspace",
                                                                        str(base))
        applied = gg(*args, env=env)
        assert applied.returncode != 0 and applied.stdout == ""
        assert applied.stderr == f"{path}:3: {said}\n", applied.stderr
