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


def test_socket_activation_moves_the_handed_socket_to_fd_3_and_is_not_offered_in_a_container(
        tmp_path):
    import pytest

    from gg.runner.isolation import IsolationUnavailable, build
    from gg.runner.socket_activation import wrap

    assert wrap(["serve"], 3) == ["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"',
                                  "sh", "serve"]
    assert wrap(["serve"], 4)[2].endswith('exec "$@" 3<&4 4<&-')
    plain = build(["serve"], policy={"isolation": "none", "egress": "all"}, workspace=tmp_path,
                  env={}, state_dir=None, capabilities={}, activation=True)
    assert plain.argv == wrap(["serve"], 3)  # nothing is handed before it: the socket is fd 3
    engine = {"container_engine": "podman", "bwrap": None, "bwrap_usable": False,
              "netns": False}
    with pytest.raises(IsolationUnavailable, match="not offered in a container"):
        build(["serve"], policy={"isolation": "container", "egress": "all"}, workspace=tmp_path,
              env={}, state_dir=None, capabilities=engine, activation=True)
