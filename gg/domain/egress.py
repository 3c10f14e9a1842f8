"""The egress allowlist: what a flight under ``egress: allowlist`` may reach, and the rules.

A policy's ``allow`` is a list of entries, each one of::

    git.example.com          a host name, every port (resolved by the runner, IPv4)
    git.example.com:443      a host name, one port (TCP and UDP)
    10.1.2.3 / 10.1.2.3:22   an IPv4 address, every port or one
    10.0.0.0/8 / 10.0.0.0/8:443   an IPv4 network (CIDR), every port or one

Entries are spelled canonically (a host lower-cased, a network by its network address), so
re-spelling one is no change. IPv6 is not routed to flights: an IPv6 entry is refused.

The rules are nftables text, loaded by the runner (:mod:`gg.runner.egress`) into the flight's
own network namespace: only the listed destinations are accepted (plus DNS to the host's
resolvers when a host name is listed), everything else is rejected at once (a TCP reset, an
ICMP "administratively prohibited"), so a refused connection fails fast instead of hanging.
Everything here is pure: names are resolved by the caller and handed in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "parse_entry", "parse_allow", "flight_rules", "host_rules", "Slice",
           "slice_for", "BLOCK", "is_wider"]

# The addresses the runner gives flights' links: 100.64.0.0/10 (shared address space, never
# a destination on the internet), cut into /30s: one per runner tag and worker slot.
BLOCK = ipaddress.IPv4Network("100.64.0.0/10")
SLOTS = 256  # worker slots a runner may have (gg.domain.policy.MAX_WORKERS)
TAGS = BLOCK.num_addresses // 4 // SLOTS  # runner blocks of SLOTS /30s each
MAX_ENTRIES = 256
DNS_PORT = 53

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_FORMS = "host[:port] or CIDR[:port]"


@dataclass(frozen=True)
class Entry:
    """One allowlist entry: a ``host`` name to resolve, or a ``network``; ``port`` or None
    (every port and protocol)."""

    host: str | None
    network: ipaddress.IPv4Network | None
    port: int | None

    @property
    def text(self) -> str:
        if self.host is not None:
            where = self.host
        else:
            assert self.network is not None
            where = (str(self.network.network_address) if self.network.prefixlen == 32
                     else str(self.network))
        return where if self.port is None else f"{where}:{self.port}"


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"allowlist entry {entry!r} has a port that is not a number from "
                         f"1 to 65535")
    return int(text)


def parse_entry(value: Any) -> Entry:
    """One entry, or ValueError with one sentence."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"an allowlist entry must be {_FORMS}, not {value!r}")
    entry = value.strip()
    if entry.count(":") > 1 or entry.startswith("["):
        raise ValueError(f"allowlist entry {entry!r} is IPv6; flights reach only IPv4 "
                         f"destinations")
    where, _, port_text = entry.partition(":")
    port = _port(port_text, entry) if ":" in entry else None
    if "/" in where or re.fullmatch(r"[0-9.]+", where):
        try:
            network = ipaddress.IPv4Network(where, strict=False)
        except ValueError:
            raise ValueError(f"allowlist entry {entry!r} is not a valid IPv4 address or "
                             f"network ({_FORMS})") from None
        return Entry(None, network, port)
    host = where.lower().rstrip(".")
    if "*" in host:
        raise ValueError(f"allowlist entry {entry!r} has a wildcard; list each host name")
    if len(host) > 253 or not all(_LABEL.match(label) for label in host.split(".")):
        raise ValueError(f"allowlist entry {entry!r} is not a host name, an IPv4 address "
                         f"or a network ({_FORMS})")
    return Entry(host, None, port)


def parse_allow(values: Any) -> tuple[str, ...]:
    """A policy's ``allow``: its entries spelled canonically, each once, in the order given;
    ValueError with one sentence."""
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise ValueError(f"allow must be a list of {_FORMS} entries")
    out: list[str] = []
    for value in values:
        text = parse_entry(value).text
        if text not in out:
            out.append(text)
    if len(out) > MAX_ENTRIES:
        raise ValueError(f"an allowlist has at most {MAX_ENTRIES} entries, not {len(out)}")
    return tuple(out)


def is_wider(old: Sequence[str], new: Sequence[str]) -> bool:
    """Does ``new`` list an entry ``old`` does not (the gate rule: adding opens a gate)?"""
    return bool(set(parse_allow(new)) - set(parse_allow(old)))


def names(allow: Sequence[str]) -> list[str]:
    """The host names an allowlist lists, to resolve."""
    return sorted({e.host for e in map(parse_entry, allow) if e.host is not None})


def destinations(allow: Sequence[str], resolved: Mapping[str, Sequence[str]]
                 ) -> list[tuple[str, int | None]]:
    """(network, port) for every entry, a host name by each address it ``resolved`` to (a
    name that resolved to nothing gives nothing)."""
    out: list[tuple[str, int | None]] = []
    for entry in map(parse_entry, allow):
        if entry.network is not None:
            nets = [str(entry.network)]
        else:
            assert entry.host is not None
            nets = [str(ipaddress.IPv4Network(a)) for a in resolved.get(entry.host, ())]
        for net in nets:
            if (net, entry.port) not in out:
                out.append((net, entry.port))
    return out


def flight_rules(table: str, allowed: Sequence[tuple[str, int | None]],
                 resolvers: Sequence[str] = ()) -> str:
    """nftables text for the flight's own namespace: its output accepts only loopback,
    replies, ``allowed`` (network, port or None) and DNS to ``resolvers``; it rejects the rest.
    Loaded whole (``nft -f -``), it replaces any table of that name."""
    lines = [f"table inet {table} {{}}", f"delete table inet {table}",
             f"table inet {table} {{",
             "  chain output {",
             "    type filter hook output priority 0; policy drop;",
             "    oif lo accept",
             "    ct state established,related accept"]
    for resolver in resolvers:
        lines.append(f"    ip daddr {resolver} meta l4proto {{ tcp, udp }} th dport "
                     f"{DNS_PORT} accept")
    for net, port in allowed:
        if port is None:
            lines.append(f"    ip daddr {net} accept")
        else:
            lines.append(f"    ip daddr {net} meta l4proto {{ tcp, udp }} th dport {port} accept")
    lines += ["    meta l4proto tcp reject with tcp reset",
              "    reject with icmpx type admin-prohibited",
              "  }",
              "}"]
    return "\n".join(lines) + "\n"


def host_rules(table: str, block: str) -> str:
    """nftables text for the host: what leaves a flight's link (source in the runner's
    ``block``) toward anywhere else is masqueraded as the host."""
    return "\n".join([
        f"table ip {table} {{}}", f"delete table ip {table}",
        f"table ip {table} {{",
        "  chain postrouting {",
        "    type nat hook postrouting priority srcnat; policy accept;",
        f"    ip saddr {block} ip daddr != {block} masquerade",
        "  }",
        "}"]) + "\n"


@dataclass(frozen=True)
class Slice:
    """A flight's link: a /30 of BLOCK, the host's end and the flight's."""

    network: ipaddress.IPv4Network
    host: str
    flight: str
    block: ipaddress.IPv4Network  # every slot of the runner's tag


def slice_for(tag: int, slot: int) -> Slice:
    """Slot ``slot`` of runner tag ``tag`` (each in range): its own /30, never another's."""
    if not 0 <= tag < TAGS or not 0 <= slot < SLOTS:
        raise ValueError(f"a flight link needs a tag below {TAGS} and a slot below {SLOTS}")
    first = int(BLOCK.network_address) + (tag * SLOTS + slot) * 4
    network = ipaddress.IPv4Network((first, 30))
    block = ipaddress.IPv4Network((int(BLOCK.network_address) + tag * SLOTS * 4, 22))
    return Slice(network, str(ipaddress.IPv4Address(first + 1)),
                 str(ipaddress.IPv4Address(first + 2)), block)
