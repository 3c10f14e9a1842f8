"""A generation's $PORT is drawn at random from the service ports, skipping what is in use."""

from __future__ import annotations

import socket

from gg.domain import services
from gg.runner.service_ports import ephemeral_range, generation_port, pick_port


def test_a_port_is_drawn_uniformly_from_every_range_and_only_where_free():
    ranges = [range(100, 104), range(200, 202)]
    drawn = {pick_port(ranges, lambda p: True) for _ in range(400)}
    assert drawn == {100, 101, 102, 103, 200, 201}
    assert pick_port(ranges, lambda p: p == 201) == 201  # one free port of many is found
    assert pick_port(ranges, lambda p: False) is None
    assert pick_port([], lambda p: True) is None


def test_a_generations_port_skips_one_in_use_and_falls_back_to_the_kernels_when_all_are():
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        env = {services.ENV_SERVICE_PORTS: f"{port}-{port}"}
        fallback = generation_port(env)  # its only port is held: one the kernel hands out
        assert fallback != port
    assert generation_port(env) == port  # free again
    low, high = ephemeral_range()
    drawn = generation_port({})
    assert services.DEFAULT_SERVICE_PORTS[0] <= drawn <= 65535 and not low <= drawn <= high
