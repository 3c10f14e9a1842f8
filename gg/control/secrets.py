"""Secrets: an admin sets and removes them, anyone signed in lists their names, a flight
asks for them at open (``gg fly --secret``) and its runner receives them with the grant.

Who may do what (docs/jobs.md, "Secrets"): setting or removing a secret is an admin's, as
charting an environment is (the people model has admins and members, no per-environment
roles). Any person who may open a flight may use a secret for every environment; a secret
scoped to environment E reaches flights of E only, which only runners allowed to run E
(labelled ``environment=E``) are granted. A value is opened only where a grant is answered
(:func:`for_grant`), so a flight granted after a new value was set gets the new one.
"""

from __future__ import annotations

from pathlib import Path

from gg.control import sealing
from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain import secrets as rules
from gg.domain.events import EventKind
from gg.domain.flights import Flight
from gg.domain.people import Person
from gg.errors import BadRequest, NotFound, Unavailable

__all__ = ["check_open", "delivered", "for_grant", "keep", "list_secrets", "names_of",
           "remove_secret", "rotate_key", "set_secret", "unopened"]


def key_file(core: Core) -> Path:
    path = core.settings.secrets_key_file
    if not path:
        raise Unavailable("this control plane has no secrets key file: set GG_SECRETS_KEY_FILE "
                          "(a server with a data dir keeps secrets.key there)")
    return Path(path)


def _context(name: str, scope: str) -> bytes:
    """The associated data a value is sealed with: which secret it is, in which scope."""
    return f"secret:{name}\0{scope}".encode()


def _what(name: str, scope: str) -> str:
    return f"secret {name}" + (f" (environment {scope})" if scope else "")


def _scope(environment: str | None) -> str:
    return environment or rules.ALL


def _view(row: dict) -> dict:
    return {"name": row["name"], "environment": row["env"] or None, "set_by": row["set_by"],
            "set_at": row["set_at"]}


def set_secret(core: Core, person: Person, name: str, *, environment: str | None,
               value: bytes) -> dict:
    """Seal ``value`` as secret ``name`` (for ``environment``, else every one); its row (never
    its value) and the sentence saying who receives it."""
    require_admin(person)
    if problem := rules.name_problem(name):
        raise BadRequest(problem)
    if problem := rules.value_problem(value):
        raise BadRequest(problem)
    if environment is not None and core.store.environment(environment) is None:
        raise NotFound(f"there is no environment {environment}: chart it first "
                       f"(gg environment chart {environment} --means PREDICATE)")
    scope = _scope(environment)
    try:
        sealed = sealing.seal(key_file(core), value, _context(name, scope))
    except sealing.SealingError as exc:
        raise Unavailable(str(exc)) from None
    now = core.now()
    with core.store.atomic():
        replaced = core.store.set_secret(name, scope, sealed, set_by=person.name, now=now)
        core.event(EventKind.SECRET_SET, actor=person.name, at=now, name=name,
                   environment=environment, replaced=replaced)
    row = {"name": name, "env": scope, "set_by": person.name, "set_at": now}
    return _view(row) | {"replaced": replaced, "scope": rules.scope_sentence(environment)}


def list_secrets(core: Core, person: Person) -> list[dict]:
    """Every secret's name and scope, who set it and when (anyone signed in: a member needs
    the names to use them)."""
    return [_view(r) for r in core.store.secrets()]


def remove_secret(core: Core, person: Person, name: str, environment: str | None) -> dict:
    require_admin(person)
    scope = _scope(environment)
    now = core.now()
    with core.store.atomic():
        if not core.store.remove_secret(name, scope):
            where = f" for environment {environment}" if environment else \
                " for every environment (give --env E for one of an environment)"
            raise NotFound(f"there is no secret {name}{where}")
        core.event(EventKind.SECRET_REMOVED, actor=person.name, at=now, name=name,
                   environment=environment)
    return {"name": name, "environment": environment, "removed": True}


# -- a flight's secrets ---------------------------------------------------------------------


def check_open(core: Core, environment: str | None, uses: list[rules.Use]) -> None:
    """Refuse, in one sentence, a flight of ``environment`` asking for a secret it may not
    use (none by that name, or only another environment's), or one this replica's key file
    does not open. Inside the opening's transaction."""
    if not uses:
        return
    if problem := rules.uses_problem(uses):
        raise BadRequest(problem)
    scopes = core.store.secret_scopes(sorted({u.name for u in uses}))
    picked = {}
    for use in uses:
        scope = rules.pick(scopes[use.name], environment)
        if scope is None:
            raise BadRequest(rules.refusal(use.name, scopes[use.name], environment) or "")
        picked[use.name] = scope
    path = key_file(core)
    for use in uses:
        scope = picked[use.name]
        sealed = core.store.sealed_secret(use.name, scope)
        if sealed is None:
            continue
        try:
            sealing.open_sealed(path, sealed, _context(use.name, scope), _what(use.name, scope))
        except sealing.SealingError as exc:
            raise Unavailable(str(exc)) from None


def keep(core: Core, flight_id: str, uses: list[rules.Use]) -> None:
    if uses:
        core.store.set_flight_secrets(flight_id, [(u.name, u.envvar) for u in uses])


def names_of(core: Core, flight_id: str) -> list[dict]:
    """What ``gg show`` says of a flight's secrets: names and variables, never a value."""
    return [{"name": n, "envvar": v} for n, v in core.store.flight_secrets(flight_id)]


def delivered(core: Core, flight: Flight, *, runner_id: str, runner_name: str, epoch: int,
              now: float) -> None:
    """The grant's event naming the secrets it delivers (in the grant's transaction)."""
    uses = core.store.flight_secrets(flight.id)
    if uses:
        core.event(EventKind.SECRET_DELIVERED, actor=f"runner:{runner_name}", at=now,
                   runner_id=runner_id, flight_id=flight.id, epoch=epoch,
                   names=[n for n, _ in uses])


def for_grant(core: Core, flight: Flight) -> tuple[list[dict], str | None]:
    """The flight's secrets as its runner receives them with the grant (name, variable,
    value, opened now), or the one sentence why they cannot be (removed since the open, or
    not opened by this replica's key): the runner then fails the flight without starting it."""
    uses = core.store.flight_secrets(flight.id)
    if not uses:
        return [], None
    scopes = core.store.secret_scopes(sorted({n for n, _ in uses}))
    out = []
    try:
        path = key_file(core)
        for name, envvar in uses:
            scope = rules.pick(scopes[name], flight.environment)
            if scope is None:
                refusal = rules.refusal(name, scopes[name], flight.environment)
                return [], f"secret {name} cannot be delivered: {refusal}"
            sealed = core.store.sealed_secret(name, scope)
            if sealed is None:
                return [], f"secret {name} was removed before the flight was granted"
            value = sealing.open_sealed(path, sealed, _context(name, scope), _what(name, scope))
            out.append({"name": name, "envvar": envvar, "value": value.decode("utf-8")})
    except (sealing.SealingError, Unavailable) as exc:
        return [], str(exc)
    return out, None


# -- the key --------------------------------------------------------------------------------


def unopened(store, path: Path) -> str | None:
    """One sentence when stored values are sealed under a key no key file here holds (said
    at start), else None."""
    missing = sealing.opens(path, store.secret_key_ids())
    if not missing:
        return None
    keys = ", ".join(sorted(missing))
    return (f"the secrets key file {path} does not open the stored secrets sealed under key "
            f"{keys}: flights asking for them are refused until GG_SECRETS_KEY_FILE names the "
            "key file every replica shares")


def rotate_key(store, path: Path) -> tuple[str, int]:
    """A new key; every stored value re-sealed under it in one transaction (see
    gg.control.sealing). The new key's id and how many values were re-sealed."""
    def reseal_all(key: bytes) -> int:
        with store.atomic():
            rows = store.sealed_secrets()
            for name, scope, sealed in rows:
                value = sealing.open_sealed(path, sealed, _context(name, scope), _what(name, scope))
                store.reseal_secret(name, scope, sealing.seal(path, value, _context(name, scope),
                                                              key=key))
            return len(rows)

    return sealing.rotate(path, reseal_all, store.secret_key_ids)
