"""Maintainers' and members' default names never collide: live runner names are unique."""

from __future__ import annotations

import re

from gg.pool.maintainer import default_name

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def test_a_maintainers_default_name_is_host_maintain_pool_while_it_fits():
    assert default_name("build1", "ui-pool") == "build1-maintain-ui-pool"


def test_two_long_pool_names_sharing_a_prefix_give_two_valid_names():
    host = "a-rather-long-host-name-in-the-lab"
    one = default_name(host, "gpu-pool-for-the-vision-team-east")
    two = default_name(host, "gpu-pool-for-the-vision-team-west")
    assert one != two
    assert _NAME.match(one) and _NAME.match(two)
    assert default_name(host, "gpu-pool-for-the-vision-team-east") == one  # stable per pool
