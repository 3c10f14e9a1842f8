"""The runner's side of enrolment: its profile in force, agents, credentials, maintenance.

One ``FleetState`` per runner process, shared by the loop and its flights:

- at check-in it adds the agents this machine has and (when one is due) a maintenance report,
  and it takes from the answer the profile in force (``profile``: null for a registered
  runner; ``{name, in_force}`` for an enrolled one, ``in_force`` null until its gate clears);
- a maintenance thread re-checks the profile's needs every MAINTENANCE_CHECK_INTERVAL (the
  control plane says how often) and at once whenever the profile in force changes;
- it tells the control plane which credentials the store holds (references only), at start
  and whenever a flight finds one missing.

The server decides the labels; nothing here advertises any.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from gg.api.enrolment import Enrolled
from gg.api.runners import RunnerProfile
from gg.client import RETRY_CALL, RETRY_JOIN, ApiError, Client, Unreachable
from gg.domain.enrolment import refs_digest
from gg.runner import agents as agent_config
from gg.runner import maintenance
from gg.runner.credentials import CredentialError, CredentialStore
from gg.settings import DEFAULTS

__all__ = ["FleetState", "enrol"]


class FleetState:
    def __init__(self, state_dir: Path, client: Client, say: Callable[[str], None] = print):
        self.state_dir = Path(state_dir)
        self.client = client
        self.say = say
        self.enrolled = False
        self.profile_name: str | None = None
        self.in_force: dict | None = None
        self.interval = DEFAULTS.maintenance_check_interval
        self.refresh: Callable[[], object] = lambda: None  # the loop sets: check in now
        self._lock = threading.Lock()
        self._poke = threading.Event()
        self._report: dict | None = None
        self._synced: str | None = None  # refs_digest of the references last registered

    # -- check-in --------------------------------------------------------------------------

    def check_in_extras(self) -> dict:
        extras: dict = {"agents": agent_config.available(self.state_dir)}
        with self._lock:
            if self._report is not None:
                extras["maintenance"] = self._report
        return extras

    def absorb(self, profile: RunnerProfile | None, *, interval: float | None = None,
               sent: dict | None = None) -> None:
        """Take what the check-in answer says about this runner's profile (``profile``) and
        how often to check its maintenance (``interval``)."""
        with self._lock:
            if sent is not None and sent.get("maintenance") is self._report:
                self._report = None  # delivered
            if interval:
                self.interval = float(interval)
            in_force = (profile.in_force if profile else None) or None
            changed = in_force != self.in_force
            self.enrolled = profile is not None
            self.profile_name = profile.name if profile else None
            self.in_force = in_force
        if changed:
            self._poke.set()

    # -- what flights read -----------------------------------------------------------------

    def profile(self) -> tuple[bool, str | None, dict | None]:
        with self._lock:
            return self.enrolled, self.profile_name, self.in_force

    # -- credentials -----------------------------------------------------------------------

    def sync_credentials(self, retry_for: float = RETRY_CALL) -> bool:
        """Tell the control plane the references this store holds; False when it could not."""
        try:
            refs = [r.as_dict() for r in CredentialStore(self.state_dir).refs()]
        except CredentialError as exc:
            self.say(f"cannot read the credential store: {exc}")
            return False
        try:
            self.client.set_credential_refs(refs, retry_for=retry_for)
        except (ApiError, Unreachable) as exc:
            self.say(f"could not register credential references yet: {exc}")
            return False
        self._synced = refs_digest(refs)
        return True

    # -- maintenance -----------------------------------------------------------------------

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self._maintain, args=(stop,), name="maintenance",
                                  daemon=True)
        thread.start()
        return thread

    def _maintain(self, stop: threading.Event) -> None:
        said: list[str] | None = None
        while not stop.is_set():
            self._poke.wait(self.interval)
            self._poke.clear()
            if stop.is_set():
                return
            enrolled, _, in_force = self.profile()
            if not enrolled or not in_force:
                continue
            if maintenance.store_digest(self.state_dir) != self._synced:
                self.sync_credentials()  # the control plane must know what the store holds
            report = maintenance.check(in_force, self.state_dir)
            missing = [i["item"] for i in report["items"] if not i["ok"]]
            if missing != said:  # say it when it changes, not every interval
                self.say(f"maintenance: missing {', '.join(missing)}" if missing else
                         f"maintenance: everything profile {self.profile_name} needs is here")
                said = missing
            with self._lock:
                self._report = report


def enrol(client: Client, token: str, body: dict, key) -> Enrolled:
    """Spend the enrolment token once: this machine's key (proved) becomes an enrolled runner."""
    return client.enrol(token, body, key, retry_for=RETRY_JOIN)
