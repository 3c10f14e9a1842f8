"""``gg install`` / ``gg uninstall`` write and remove systemd units (checked under --root,
never on this host's own units or accounts), ``gg server --tls-cert --tls-key`` serves HTTPS,
and ``gg server backup`` copies a running server's store (issue 16, point 2)."""

from __future__ import annotations

import datetime
import os
import pwd
import shutil
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from gg import client as client_module
from gg.client import Client
from gg.launch import free_port, gg_argv

from support import cli, wait_until

ANALYZE = shutil.which("systemd-analyze")


def gg(*args: str, home=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"HOME": str(home)} if home else {})}
    return subprocess.run(gg_argv(*args), capture_output=True, text=True, env=env, timeout=60)


def verified(path) -> None:
    """systemd's own check where the tool exists; the content is checked either way."""
    if ANALYZE:
        done = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr


def test_a_runner_unit_restarts_on_failure_with_its_own_state_and_config(tmp_path):
    done = gg("install", "runner", "--name", "build-1", "--root", str(tmp_path),
              "--", "--labels", "team=web", "--workers", "2")
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "etc/systemd/system/gg-runner-build-1.service"
    text = unit.read_text()
    verified(unit)
    assert "Restart=on-failure" in text and "WantedBy=multi-user.target" in text
    assert "StateDirectory=gg/runner-build-1" in text
    assert "ConfigurationDirectory=gg/runner-build-1" in text
    assert "Environment=GG_STATE_DIR=%S/gg/runner-build-1" in text
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith("-m gg runner up --name build-1 --labels team=web --workers 2")
    assert "systemctl daemon-reload && systemctl enable --now gg-runner-build-1.service" \
        in done.stdout  # said, not run: nothing under --root is started
    removed = gg("uninstall", "runner", "--name", "build-1", "--root", str(tmp_path))
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()
    again = gg("uninstall", "runner", "--name", "build-1", "--root", str(tmp_path))
    assert again.returncode == 5 and "nothing to uninstall" in again.stderr


def test_print_shows_the_unit_and_writes_nothing(tmp_path):
    done = gg("install", "server", "--print", "--root", str(tmp_path), "--", "--listen",
              "0.0.0.0:8421")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[Unit]\nDescription=gg control plane\n")
    assert "gg server --data-dir ${STATE_DIRECTORY} --listen 0.0.0.0:8421" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_user_units_maintainers_and_accounts(tmp_path):
    home = tmp_path / "home"
    done = gg("install", "maintainer", "--pool", "ui-pool", "--user", "--root", str(tmp_path),
              home=home)
    assert done.returncode == 0, done.stderr
    unit = tmp_path / str(home).lstrip("/") / ".config/systemd/user/gg-maintainer.service"
    text = unit.read_text()
    assert "WantedBy=default.target" in text and "User=" not in text
    assert "runner maintain ui-pool --state-dir ${STATE_DIRECTORY}" in text
    assert "systemctl --user daemon-reload" in done.stdout

    account = "gg-test-never-made"
    system = gg("install", "server", "--run-as", account, "--create-user", "--root",
                str(tmp_path))
    assert system.returncode == 0, system.stderr
    server_unit = tmp_path / "etc/systemd/system/gg-server.service"
    assert f"User={account}" in server_unit.read_text()
    verified(server_unit)
    assert f"useradd --system --user-group --no-create-home --shell /usr/sbin/nologin " \
           f"{account}" in system.stdout
    with pytest.raises(KeyError):
        pwd.getpwnam(account)  # --root changes nothing on this host

    for args, sentence in (
            (("maintainer",), "gg install maintainer --pool POOL"),
            (("runner", "--user", "--run-as", "x"), "--run-as is for system units"),
            (("runner", "--create-user"), "--create-user needs --run-as USER"),
            (("robot",), "gg install takes runner, maintainer, server")):
        refused = gg("install", *args, "--root", str(tmp_path))
        assert refused.returncode == 2 and sentence in refused.stderr, refused.stderr


def test_a_run_as_account_cannot_reach_an_interpreter_under_a_private_directory():
    import tempfile

    from gg.cli.install import unreachable

    base = Path(tempfile.mkdtemp(dir="/tmp"))
    base.chmod(0o755)
    private = base / "private"
    (private / "bin").mkdir(parents=True)
    python = private / "bin" / "python3"
    python.write_text("")
    python.chmod(0o755)
    private.chmod(0o700)  # as /root is, where a pyenv Python lives
    try:
        assert unreachable(python, 12345, set()) == private
        assert unreachable(python, None, set()) == private  # an account not made yet
        assert unreachable(python, 0, set()) is None
        private.chmod(0o711)
        assert unreachable(python, 12345, set()) is None
    finally:
        private.chmod(0o755)
        shutil.rmtree(base)


def test_uninstall_names_the_state_directory_kept_as_a_path_not_a_systemd_specifier(tmp_path):
    assert gg("install", "runner", "--name", "b-1", "--root", str(tmp_path)).returncode == 0
    done = gg("uninstall", "runner", "--name", "b-1", "--root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "its state stays in /var/lib/gg/runner-b-1 " in done.stdout
    assert "%S" not in done.stdout

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(home)
    for verb in ("install", "uninstall"):
        done = subprocess.run(gg_argv(verb, "runner", "--user", "--root", str(tmp_path)),
                              capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
    assert f"its state stays in {home}/.local/state/gg/runner " in done.stdout


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    import ipaddress

    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_the_server_serves_https_with_tls_cert_and_key(tmp_path, monkeypatch):
    cert, key = _self_signed(tmp_path)
    port = free_port()
    server = subprocess.Popen(gg_argv("server", "--data-dir", str(tmp_path / "data"), "--listen",
                                      f"127.0.0.1:{port}", "--tls-cert", str(cert),
                                      "--tls-key", str(key)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def healthy():
            try:
                return httpx.get(f"https://127.0.0.1:{port}/v1/health", verify=str(cert),
                                 timeout=2).status_code == 200
            except httpx.TransportError:
                return False
        wait_until(healthy, 60, what="the control plane over HTTPS")
        # gg's own client over TLS: a request's head and body leave in one send there too
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        monkeypatch.setattr(client_module, "_TLS", [])  # made again, from SSL_CERT_FILE
        token = (tmp_path / "data" / "owner-token").read_text().strip()
        opened = Client(f"https://127.0.0.1:{port}", token).open_flight(
            {"command": ["true"], "title": "over tls"})
        assert opened.title == "over tls"
    finally:
        server.terminate()
        server.wait(timeout=30)
    wrong = gg("server", "--data-dir", str(tmp_path / "d2"), "--tls-cert", str(cert),
               "--tls-key", str(cert))
    assert wrong.returncode == 2 and "do not load as a certificate and its key" in wrong.stderr
    half = gg("server", "--tls-cert", str(cert))
    assert half.returncode == 2 and "needs both --tls-cert FILE and --tls-key FILE" in half.stderr


def test_backup_copies_a_running_servers_store(fleet, tmp_path):
    flight = fleet.api().open_flight({"command": ["true"]})
    target = tmp_path / "backup.sqlite3"
    code, out, err = cli(fleet, "server", "backup", "--data-dir", str(fleet.server.data_dir),
                         "--to", str(target))
    assert code == 0, err
    assert out.startswith(f"backed up {fleet.server.data_dir} to {target}")
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    conn = sqlite3.connect(target)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT id FROM flights").fetchall() == [(flight["id"],)]
    finally:
        conn.close()
    code, _, err = cli(fleet, "server", "backup", "--data-dir", str(fleet.server.data_dir),
                       "--to", str(target))
    assert code == 6 and "exists already" in err


def test_backup_into_a_missing_directory_names_the_directory_not_the_store(tmp_path):
    (tmp_path / "data" / "gg.sqlite3").parent.mkdir()
    sqlite3.connect(tmp_path / "data" / "gg.sqlite3").close()
    target = tmp_path / "no-such-dir" / "backup.sqlite3"
    done = gg("server", "backup", "--data-dir", str(tmp_path / "data"), "--to", str(target))
    assert done.returncode == 5, done.stderr
    assert f"there is no directory {target.parent} to write the backup in" in done.stderr
    assert "no gg store" not in done.stderr
