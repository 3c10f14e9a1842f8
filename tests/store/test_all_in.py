"""``Database.all_in``: one statement's ``IN (...)`` list over any number of ids, in chunks
small enough for SQLite's variable limit even where the list is written twice."""

from __future__ import annotations

from gg.store import open_store
from gg.store.db import IN_CHUNK


def test_an_in_list_longer_than_a_chunk_and_written_twice_reads_every_row(tmp_path):
    store = open_store(tmp_path, None)
    ids = [f"f_{i:04d}" for i in range(IN_CHUNK * 2 + 17)]
    with store.atomic():
        for i, fid in enumerate(ids):
            store.set_grace(fid, float(i))
    assert store.graces_of(ids) == {fid: float(i) for i, fid in enumerate(ids)}
    rows = store.db.all_in("SELECT flight_id FROM flight_grace "
                           "WHERE flight_id IN ({ids}) OR flight_id IN ({ids})", ids)
    assert sorted(r[0] for r in rows) == ids
    assert store.db.all_in("SELECT flight_id FROM flight_grace WHERE flight_id IN ({ids})",
                           []) == []
    store.close()
