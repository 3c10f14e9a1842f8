"""``egress: allowlist``: each flight in a network namespace of its own, behind its own rules.

For every flight under an allowlist the runner (root) makes, before the flight starts::

    ip netns add gg-egress-TAG-SLOT                        /run/netns/gg-egress-TAG-SLOT
    a veth pair: ggeTAGhSLOT on the host, eth0 inside      a /30 of 100.64.0.0/10 each
    inside: lo and eth0 up, default route via the host's end
    inside: nftables table inet gg_egress                  (gg.domain.egress.flight_rules)
    on the host, once per runner: table ip gg_egress_TAG   masquerade out of the runner's block

TAG is the runner's own number (from its state directory, so a restarted runner knows its
leftovers), SLOT the lowest link number no running flight of the runner holds. The flight's
process enters the namespace (``nsenter --net=PATH`` before bubblewrap; podman's ``--network
ns:PATH``; a gVisor bundle's network namespace path), so everything it starts is inside. It
runs without CAP_NET_ADMIN (its flight identity, every capability set empty), so it cannot
change the rules, the address or the route. When the flight ends the namespace is deleted,
which takes the veth pair and the rules with it. A runner that starts removes its tag's
namespaces and host table that a killed predecessor left behind (:func:`clear`).

Host names in the allowlist are resolved (IPv4) when a flight's namespace is made, so each
flight gets the addresses of its start; a long flight keeps them.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gg.domain import egress as rules

NETNS_DIR = Path("/run/netns")
PREFIX = "gg-egress-"
FLIGHT_TABLE = "gg_egress"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
RESOLV_CONF = Path("/etc/resolv.conf")
TIMEOUT = 10.0


class EgressUnavailable(Exception):
    """The flight's network namespace could not be made; the text is one sentence."""


def tool(name: str) -> str | None:
    """A system tool by its path in the system directories (never a flight's PATH)."""
    return shutil.which(name, path=SYSTEM_PATH)


def tag_for(state_dir: Path | str) -> int:
    """The runner's number: the same for the same state directory, so leftovers are found."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(state_dir))).digest()
    return int.from_bytes(digest[:4], "big") % rules.TAGS


def namespace_name(tag: int, slot: int) -> str:
    return f"{PREFIX}{tag:03x}-{slot}"


def host_link(tag: int, slot: int) -> str:
    return f"gge{tag:03x}h{slot}"  # at most 10 characters: an interface name has 15


def host_table(tag: int) -> str:
    return f"gg_egress_{tag:03x}"


def _run(argv: Sequence[str], text: str | None = None) -> None:
    try:
        done = subprocess.run(list(argv), input=text, capture_output=True, text=True,
                              timeout=TIMEOUT, env={"PATH": SYSTEM_PATH}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EgressUnavailable(f"{Path(argv[0]).name} failed: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit code %d" % done.returncode])[-1]
        raise EgressUnavailable(f"{Path(argv[0]).name} failed: {last}")


def missing() -> str | None:
    """What this host lacks for an allowlist, as the end of "egress allowlist needs ...";
    None when every piece is here (the capability probe then tries it for real)."""
    pieces = []
    if tool("nft") is None:
        pieces.append("nftables (nft)")
    if tool("ip") is None:
        pieces.append("iproute2 (ip)")
    if tool("nsenter") is None:
        pieces.append("util-linux (nsenter)")
    if os.geteuid() != 0:
        pieces.append("root")
    return " and ".join(pieces) or None


def probe() -> str | None:
    """Make a namespace with rules and remove it: None when it works, else why not."""
    lacking = missing()
    if lacking:
        return lacking
    name = f"{PREFIX}probe-{os.getpid()}-{threading.get_ident() % 10000}"
    try:
        _run([str(tool("ip")), "netns", "add", name])
        _run([str(tool("nsenter")), f"--net={NETNS_DIR / name}", str(tool("nft")), "-f", "-"],
             rules.flight_rules(FLIGHT_TABLE, []))
    except EgressUnavailable as exc:
        return f"a network namespace with nftables rules ({exc})"
    finally:
        subprocess.run([str(tool("ip")), "netns", "delete", name], capture_output=True,
                       timeout=TIMEOUT, check=False)
    return None


def resolve(names: Sequence[str]) -> dict[str, list[str]]:
    """Each host name's IPv4 addresses now; a name that does not resolve has none."""
    out: dict[str, list[str]] = {}
    for name in names:
        try:
            infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            out[name] = []
            continue
        out[name] = sorted({str(info[4][0]) for info in infos})
    return out


def resolvers(path: Path = RESOLV_CONF) -> list[str]:
    """The host's IPv4 name servers a flight's namespace can reach (not loopback ones: inside,
    loopback is the namespace's own)."""
    out: list[str] = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                address = ipaddress.IPv4Address(parts[1])
            except ValueError:
                continue
            if not address.is_loopback and str(address) not in out:
                out.append(str(address))
    return out


@dataclass
class Network:
    """One flight's network namespace; ``path`` is what its process enters."""

    links: Links
    slot: int
    name: str
    path: str
    closed: bool = False

    def close(self) -> None:
        """Delete the namespace (its veth pair and rules go with it); once."""
        if self.closed:
            return
        self.closed = True
        try:
            _remove(self.links.tag, self.slot)
        finally:
            self.links.give_back(self.slot)


class Links:
    """A runner's flight links: slots, its host table, and its leftovers."""

    def __init__(self, state_dir: Path | str, slots: int = rules.SLOTS) -> None:
        self.tag = tag_for(state_dir)
        self.slots = slots
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._host_ready = False

    def _take(self) -> int:
        with self._lock:
            for slot in range(self.slots):
                if slot not in self._held:
                    self._held.add(slot)
                    return slot
        raise EgressUnavailable("every flight link of this runner is in use")

    def give_back(self, slot: int) -> None:
        with self._lock:
            self._held.discard(slot)

    def _host(self) -> None:
        """The runner's masquerade table, once; forwarding on (it stays on)."""
        with self._lock:
            if self._host_ready:
                return
            block = rules.slice_for(self.tag, 0).block
            _run([str(tool("nft")), "-f", "-"], rules.host_rules(host_table(self.tag), str(block)))
            try:
                if IP_FORWARD.read_text().strip() != "1":
                    IP_FORWARD.write_text("1\n")
            except OSError as exc:
                raise EgressUnavailable(f"cannot turn on IPv4 forwarding: {exc}") from None
            self._host_ready = True

    def open(self, allow: Sequence[str]) -> Network:
        """A new namespace whose only way out is ``allow`` (canonical entries)."""
        lacking = missing()
        if lacking:
            raise EgressUnavailable(f"egress allowlist needs {lacking}")
        self._host()
        slot = self._take()
        name = namespace_name(self.tag, slot)
        link = rules.slice_for(self.tag, slot)
        hostif = host_link(self.tag, slot)
        network = Network(self, slot, name, str(NETNS_DIR / name))
        names = rules.names(allow)
        allowed = rules.destinations(allow, resolve(names))
        ip = str(tool("ip"))
        try:
            if (NETNS_DIR / name).exists() or Path("/sys/class/net", hostif).exists():
                _remove(self.tag, slot)  # a leftover of this slot
            _run([ip, "-batch", "-"], "\n".join([
                f"netns add {name}",
                f"link add {hostif} type veth peer name eth0 netns {name}",
                f"addr add {link.host}/30 dev {hostif}",
                f"link set {hostif} up"]) + "\n")
            _run([ip, "-n", name, "-batch", "-"], "\n".join([
                "link set lo up",
                f"addr add {link.flight}/30 dev eth0",
                "link set eth0 up",
                f"route add default via {link.host}"]) + "\n")
            _run([str(tool("nsenter")), f"--net={network.path}", str(tool("nft")), "-f", "-"],
                 rules.flight_rules(FLIGHT_TABLE, allowed, resolvers() if names else ()))
        except EgressUnavailable:
            network.close()
            raise
        return network


_LINKS: dict[str, Links] = {}
_LINKS_LOCK = threading.Lock()


def links_for(state_dir: Path | str | None) -> Links:
    """The one Links of the runner with this state directory (in this process)."""
    key = os.path.realpath(state_dir or "/")
    with _LINKS_LOCK:
        if key not in _LINKS:
            _LINKS[key] = Links(key)
        return _LINKS[key]


def _remove(tag: int, slot: int) -> None:
    """Delete a slot's link (at once: a deleted namespace frees its veth pair only later)
    and its namespace, whichever is there."""
    subprocess.run([str(tool("ip")), "-force", "-batch", "-"], capture_output=True, text=True,
                   input=f"link delete {host_link(tag, slot)}\n"
                         f"netns delete {namespace_name(tag, slot)}\n",
                   timeout=TIMEOUT, env={"PATH": SYSTEM_PATH}, check=False)


def clear(state_dir: Path | str) -> list[str]:
    """Remove what a runner with this state directory left: its namespaces (their links and
    rules go with them), a host link without one, its host table. Returns what it removed."""
    tag = tag_for(state_dir)
    ip, nft = tool("ip"), tool("nft")
    if ip is None or nft is None or os.geteuid() != 0:
        return []
    removed: list[str] = []
    mine = f"{PREFIX}{tag:03x}-"
    try:
        names = sorted(os.listdir(NETNS_DIR))
    except OSError:
        names = []
    for name in names:
        if name.startswith(mine):
            subprocess.run([ip, "netns", "delete", name], capture_output=True, timeout=TIMEOUT,
                           check=False)
            removed.append(name)
    try:
        links = sorted(os.listdir("/sys/class/net"))
    except OSError:
        links = []
    for link in links:
        if link.startswith(f"gge{tag:03x}h"):
            subprocess.run([ip, "link", "delete", link], capture_output=True, timeout=TIMEOUT,
                           check=False)
            removed.append(link)
    table = host_table(tag)
    if subprocess.run([nft, "delete", "table", "ip", table], capture_output=True,
                      timeout=TIMEOUT, check=False).returncode == 0:
        removed.append(table)
    return removed
