"""The loop guard: armed, a store call made on a thread running an event loop raises; the same
call handed to a worker thread, or made with the guard unarmed, answers."""

import asyncio

import pytest

from gg.store import loop_guard, open_store


@pytest.fixture
def store(tmp_path):
    store = open_store(tmp_path, None)
    try:
        yield store
    finally:
        loop_guard.arm(False)
        store.close()


def test_armed_guard_refuses_a_read_and_a_write_made_on_a_running_loop(store):
    loop_guard.arm(True)

    async def on_the_loop():
        with pytest.raises(loop_guard.StoreOnTheLoop):
            store.runners()
        with pytest.raises(loop_guard.StoreOnTheLoop):
            with store.atomic():
                pass

    asyncio.run(on_the_loop())


def test_armed_guard_lets_a_worker_thread_and_the_writer_use_the_store(store):
    loop_guard.arm(True)

    async def handed_off():
        assert await asyncio.to_thread(store.runners) == []
        await asyncio.wrap_future(store.db.submit(store.runners))

    asyncio.run(handed_off())


def test_unarmed_guard_lets_the_loop_use_the_store(store):
    async def on_the_loop():
        return store.runners()

    assert asyncio.run(on_the_loop()) == []
