"""Runner credential checks are a cached hash look-up, and a credential that stops naming its
runner (renewed, superseded, retired) is refused at once, cached or not."""

from __future__ import annotations

import pytest

from gg import keys
from gg.control import admin, runners
from gg.control.credential_cache import CredentialCache
from gg.domain.runners import Runner, RunnerIdentity
from gg.errors import Forbidden, Unauthorized

from support import new_key, proof


def _register(core, owner, key=None, name="r1"):
    key = key or new_key()
    runner, credential = runners.register(core, owner, name=name, **proof(core, "register", key),
                                          labels={}, workers=1, inventory={}, version=None)
    return runner, credential, key


def test_a_second_check_reads_the_cache_not_the_store(core, owner):
    runner, credential, _ = _register(core, owner)
    assert runners.authenticate(core, credential).id == runner.id
    calls = []
    real = core.store.runner_by_credential
    core.store.runner_by_credential = lambda h: calls.append(h) or real(h)
    assert runners.authenticate(core, credential).id == runner.id
    assert calls == []


def test_the_cache_holds_who_a_credential_names_not_the_runners_row(core, owner):
    """10,000 cached credentials must not hold 10,000 rows with their inventories: the cache
    keeps the identity; a route that needs the row reads it as it is now."""
    runner, credential, _ = _register(core, owner)
    core.store.update_runner(runner.id, inventory={"hostname": "h" * 4000},
                             labels={"zone": "a"})
    who = runners.authenticate(core, credential)
    assert who == RunnerIdentity.of(core.store.runner(runner.id))
    assert not hasattr(who, "inventory") and not hasattr(who, "__dict__")
    core.store.update_runner(runner.id, labels={"zone": "b"})  # the cache is not told
    assert runners.authenticate(core, credential) is who  # a hit
    assert runners.authenticate_row(core, credential).labels == {"zone": "b"}
    with pytest.raises(Unauthorized):
        runners.authenticate(core, credential[:-2] + "xx")  # a near miss is a miss, then a 401


def test_a_retired_runner_is_refused_at_once_though_its_credential_was_cached(core, owner):
    runner, credential, _ = _register(core, owner)
    runners.authenticate(core, credential)
    admin.retire(core, owner, runner.id)
    with pytest.raises(Forbidden) as refused:
        runners.authenticate(core, credential)
    assert refused.value.code == "runner_retired"


def test_a_renewed_credential_ends_the_old_one_at_once(core, owner):
    runner, credential, key = _register(core, owner)
    runners.authenticate(core, credential)
    nonce = runners.challenge(core, runner)["nonce"]
    renewed = runners.renew_credential(core, runner, nonce,
                                       keys.sign(key, f"gg-renew:{runner.id}:{nonce}".encode()))
    with pytest.raises(Unauthorized):
        runners.authenticate(core, credential)
    assert runners.authenticate(core, renewed["credential"]).id == runner.id


def test_registering_the_key_again_ends_the_superseded_credential_at_once(core, owner):
    runner, credential, key = _register(core, owner)
    runners.authenticate(core, credential)
    again, fresh, _ = _register(core, owner, key)
    assert again.id == runner.id
    with pytest.raises(Unauthorized):
        runners.authenticate(core, credential)
    assert runners.authenticate(core, fresh).id == runner.id


def test_a_read_that_began_before_a_forget_never_refills_the_cache():
    cache = CredentialCache(10, 300.0, lambda: 0.0)
    generation = cache.generation  # a reader starts...
    cache.forget("r_1")  # ...the credential changes and is forgotten...
    cache.put("h", Runner(id="r_1", name="a"), generation)  # ...the old read comes back
    assert cache.get("h") is None


def test_the_cache_is_bounded_and_entries_age_out():
    now = [0.0]
    cache = CredentialCache(2, 10.0, lambda: now[0])
    for i in range(3):
        cache.put(f"h{i}", Runner(id=f"r_{i}", name="a"), cache.generation)
    assert len(cache) == 2 and cache.get("h0") is None
    now[0] = 10.0
    assert cache.get("h2") is None
