"""The egress allowlist's pure rules: entries, their spelling, the gate, the nftables text."""

from __future__ import annotations

import ipaddress

import pytest

from gg.airspace.errors import AirspaceError
from gg.airspace.profiles import profile_from_mapping
from gg.domain import egress
from gg.domain.policy import Policy, is_looser
from gg.domain.profile_gate import effective_profile, judge_profile_change


@pytest.mark.parametrize("given, canonical", [
    ("git.example.com", "git.example.com"),
    ("Git.Example.COM.:443", "git.example.com:443"),
    ("10.1.2.3", "10.1.2.3"),
    ("10.1.2.3/32:22", "10.1.2.3:22"),
    ("10.1.2.3/8", "10.0.0.0/8"),
    (" 192.168.0.0/16:5432 ", "192.168.0.0/16:5432"),
])
def test_an_entry_is_a_host_or_an_ipv4_network_with_an_optional_port_spelled_one_way(
        given, canonical):
    assert egress.parse_entry(given).text == canonical


@pytest.mark.parametrize("given, sentence", [
    ("10.0.0.0/33", "allowlist entry '10.0.0.0/33' is not a valid IPv4 address or network "
                    "(host[:port] or CIDR[:port])"),
    ("10.0.0.256", "allowlist entry '10.0.0.256' is not a valid IPv4 address or network "
                   "(host[:port] or CIDR[:port])"),
    ("git.example.com:0", "allowlist entry 'git.example.com:0' has a port that is not a "
                          "number from 1 to 65535"),
    ("git.example.com:https", "allowlist entry 'git.example.com:https' has a port that is "
                              "not a number from 1 to 65535"),
    ("2001:db8::/32", "allowlist entry '2001:db8::/32' is IPv6; flights reach only IPv4 "
                      "destinations"),
    ("*.example.com", "allowlist entry '*.example.com' has a wildcard; list each host name"),
    ("bad_host!", "allowlist entry 'bad_host!' is not a host name, an IPv4 address or a "
                  "network (host[:port] or CIDR[:port])"),
    ("", "an allowlist entry must be host[:port] or CIDR[:port], not ''"),
    (7, "an allowlist entry must be host[:port] or CIDR[:port], not 7"),
])
def test_a_bad_entry_is_one_sentence(given, sentence):
    with pytest.raises(ValueError) as refused:
        egress.parse_entry(given)
    assert str(refused.value) == sentence


def test_an_allowlist_is_a_list_kept_canonical_once_each():
    assert egress.parse_allow(["10.1.2.3/8", "10.0.0.0/8", "A.example:80"]) == (
        "10.0.0.0/8", "a.example:80")
    with pytest.raises(ValueError, match="allow must be a list"):
        egress.parse_allow("10.0.0.0/8")


def test_a_policy_carries_its_allowlist_only_when_it_has_one():
    policy = Policy.from_dict({"egress": "allowlist", "allow": ["Git.Example:443"]})
    assert policy.allow == ("git.example:443",)
    assert policy.to_dict()["allow"] == ["git.example:443"]
    assert Policy.from_dict(policy.to_dict()) == policy
    assert "allow" not in Policy().to_dict()
    with pytest.raises(ValueError, match="has a wildcard"):
        Policy.from_dict({"allow": ["*.example"]})


def test_adding_an_entry_loosens_and_removing_one_tightens():
    one = Policy("sandbox", "allowlist", allow=("10.0.0.0/8",))
    two = Policy("sandbox", "allowlist", allow=("10.0.0.0/8", "git.example:443"))
    assert is_looser(one, two) and not is_looser(two, one)
    assert not is_looser(one, Policy("sandbox", "allowlist", allow=("10.1.0.0/8",)))


def _profile(allow):
    return profile_from_mapping("builders", {
        "purpose": "builds", "roles": ["runner"], "environment": "ci",
        "policy": {"isolation": "sandbox", "egress": "allowlist", "allow": allow}})


def test_a_profile_adding_an_allowlist_entry_opens_a_gate_and_removing_one_applies_now():
    old = _profile(["10.0.0.0/8", "git.example:443"])
    new = _profile(["git.example:443", "pypi.example:443"])
    change = judge_profile_change(old, new)
    assert [(c.field, c.description, c.widening) for c in change.changes] == [
        ("policy.allow", "adds allowlist entry pypi.example:443 (opens a gate)", True),
        ("policy.allow", "removes allowlist entry 10.0.0.0/8 (applies now)", False)]
    in_force = effective_profile(old, new)
    assert in_force is not None and in_force.policy.allow == ("git.example:443",)


def test_a_profiles_bad_allowlist_entry_names_where_it_is():
    with pytest.raises(AirspaceError) as refused:
        _profile(["10.0.0.0/8", "10.0.0.0/33"])
    assert "policy.allow[1]" in str(refused.value)
    assert "is not a valid IPv4 address or network" in str(refused.value)


def test_host_names_become_each_address_they_resolved_to():
    allow = ("git.example:443", "10.0.0.0/8", "gone.example")
    assert egress.names(allow) == ["git.example", "gone.example"]
    assert egress.destinations(allow, {"git.example": ["192.0.2.7", "192.0.2.8"]}) == [
        ("192.0.2.7/32", 443), ("192.0.2.8/32", 443), ("10.0.0.0/8", None)]


def test_the_flights_rules_accept_only_the_listed_destinations_and_reject_the_rest():
    text = egress.flight_rules("gg_egress", [("192.0.2.7/32", 443), ("10.0.0.0/8", None)],
                               ["10.255.255.53"])
    assert text == (
        "table inet gg_egress {}\n"
        "delete table inet gg_egress\n"
        "table inet gg_egress {\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy drop;\n"
        "    oif lo accept\n"
        "    ct state established,related accept\n"
        "    ip daddr 10.255.255.53 meta l4proto { tcp, udp } th dport 53 accept\n"
        "    ip daddr 192.0.2.7/32 meta l4proto { tcp, udp } th dport 443 accept\n"
        "    ip daddr 10.0.0.0/8 accept\n"
        "    meta l4proto tcp reject with tcp reset\n"
        "    reject with icmpx type admin-prohibited\n"
        "  }\n"
        "}\n")


def test_the_hosts_rule_masquerades_only_what_leaves_the_runners_block():
    text = egress.host_rules("gg_egress_00a", "100.64.40.0/22")
    assert "    ip saddr 100.64.40.0/22 ip daddr != 100.64.40.0/22 masquerade\n" in text
    assert text.startswith("table ip gg_egress_00a {}\ndelete table ip gg_egress_00a\n")


def test_each_runner_tag_and_slot_gets_its_own_link_inside_the_shared_address_space():
    first, last = egress.slice_for(0, 0), egress.slice_for(egress.TAGS - 1, egress.SLOTS - 1)
    assert (str(first.network), first.host, first.flight) == ("100.64.0.0/30", "100.64.0.1",
                                                             "100.64.0.2")
    assert str(last.network) == "100.127.255.252/30"
    assert egress.slice_for(3, 1).block == egress.slice_for(3, 200).block
    assert not egress.slice_for(3, 0).block.overlaps(egress.slice_for(4, 0).block)
    links = {egress.slice_for(t, s).network for t in (0, 1, 4095) for s in (0, 1, 255)}
    assert len(links) == 9 and all(n.subnet_of(egress.BLOCK) for n in links)
    assert all(isinstance(n, ipaddress.IPv4Network) for n in links)
    with pytest.raises(ValueError):
        egress.slice_for(egress.TAGS, 0)
