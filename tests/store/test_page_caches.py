"""What pages each SQLite connection keeps (gg/store/sqlite.py): the write connection 8 MB,
each thread's reader SQLite's default 2 MB (docs/performance.md, "The server's memory under
a fleet")."""

import threading

from gg.store.sqlite import READ_CACHE_KIB, WRITE_CACHE_KIB, SqliteDatabase


def test_the_write_connection_keeps_32_mb_and_each_threads_reader_2_mb(tmp_path):
    db = SqliteDatabase(tmp_path / "gg.db")
    try:
        readers: list[int] = []

        def read() -> None:  # a worker thread's first read opens its own reader
            readers.append(db.one("PRAGMA cache_size")[0])

        for _ in range(2):
            thread = threading.Thread(target=read)
            thread.start()
            thread.join()
        with db.atomic():  # inside a write transaction, the write connection answers
            written = db.one("PRAGMA cache_size")[0]
        assert (WRITE_CACHE_KIB, READ_CACHE_KIB) == (8_000, 2_000)
        assert written == -WRITE_CACHE_KIB
        assert readers == [-READ_CACHE_KIB, -READ_CACHE_KIB]
    finally:
        db.close()
