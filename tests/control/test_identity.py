"""Finding a runner by its key fingerprint: one indexed lookup, retired runners included."""

from __future__ import annotations

import pytest

from gg import keys
from gg.control import admin, runners
from gg.domain.identity import key_fingerprint
from gg.errors import NotFound

from support import check_in, new_key, proof


def test_a_runner_is_found_by_its_key_fingerprint_even_once_retired(core, owner):
    key = new_key()
    web, _ = runners.register(core, owner, name="web", **proof(core, "register", key),
                              labels={}, workers=1, inventory={}, version=None)
    check_in(core, web)
    printed = key_fingerprint(keys.public_text(key))
    assert runners.by_fingerprint(core, printed).id == web.id
    assert runners.by_fingerprint(core, printed.removeprefix("SHA256:")).id == web.id
    admin.retire(core, owner, web.id)
    assert runners.by_fingerprint(core, printed).id == web.id
    with pytest.raises(NotFound, match="no runner has the key fingerprint SHA256:nope"):
        runners.by_fingerprint(core, "SHA256:nope")
