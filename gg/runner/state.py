"""The runner's state directory: its key, its credential, its workspaces (all private)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from gg import keys, trees


@dataclass
class Registration:
    server: str
    runner_id: str
    name: str
    credential: str
    credential_expires_at: float | None = None


class StateDir:
    def __init__(self, path: Path):
        self.path = Path(os.path.abspath(path))
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        trees.record(self.path)  # its key and credential are hidden from every runner's flights
        os.chmod(self.path, 0o700)
        self.workspaces = self.path / "workspaces"
        self.workspaces.mkdir(exist_ok=True, mode=0o700)

    @property
    def key_path(self) -> Path:
        return self.path / "key.pem"

    @property
    def registration_path(self) -> Path:
        return self.path / "runner.json"

    def key(self):
        return keys.load_or_create(self.key_path)

    def registration(self) -> Registration | None:
        try:
            data = json.loads(self.registration_path.read_text())
            return Registration(**data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            return None

    def save_registration(self, reg: Registration) -> None:
        tmp = self.registration_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(reg), fh)
        os.replace(tmp, self.registration_path)

    @property
    def policy_path(self) -> Path:
        return self.path / "policy.json"

    def policy_workers(self) -> int | None:
        """The workers the control plane's policy last said, or None (never told, unreadable)."""
        try:
            value = json.loads(self.policy_path.read_text()).get("workers")
        except (OSError, ValueError, AttributeError):
            return None
        return value if isinstance(value, int) and 1 <= value <= 256 else None

    def remember_policy_workers(self, workers: object) -> None:
        if not isinstance(workers, int) or workers == self.policy_workers():
            return
        tmp = self.policy_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"workers": workers}, fh)
        os.replace(tmp, self.policy_path)
