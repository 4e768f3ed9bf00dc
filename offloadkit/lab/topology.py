"""Lab topologies in network namespaces: sender -> receiver, or sender -> router -> receiver.

Each link is a veth pair created directly inside its two namespaces (nothing
ever appears in the host's namespace). Addresses come from 198.18.0.0/15
(``ip_version=6``: 2001:2::/48; ``gso_max_size``: BIG TCP on the sender).
Knobs: per-link MTU, ``ethtool -K`` offloads per interface, a ``tbf`` rate and
queue on the bottleneck egress, an iptables TCPMSS clamp on the router, TCP
timestamps, congestion control and MTU probing in the end hosts, GRO batching
in sysfs, and the pathologies of :class:`LabSettings` (``drop_gso``, ``loss``,
``blackhole_mtu``).

Where offloads apply (the lab notes in DESIGN.md explain why):
- ``tso``/``gso``/``tx_csum`` are the sender's interface;
- ``gro``/``rx_csum`` are the receiver's interface;
- the router's egress has ``tso off gso on`` by default, so the wire after it
  carries software-GSO segments, and veth runs the receiver's GRO on them
  (veth only does GRO when the *sending* veth has TSO off).
"""
from __future__ import annotations

import math
import re
import shlex
import subprocess
from dataclasses import dataclass, field, asdict

from ..sim.scenario import TBF_BURST_BYTES  # the tbf bucket when ``queue`` comes without ``burst``
from ..units import parse_fraction, parse_rate, parse_size, parse_time
from . import safety

SENDER_NET, RECEIVER_NET = "198.18.1", "198.18.2"
SENDER_NET6, RECEIVER_NET6 = "2001:2:1:", "2001:2:2:"     # the benchmarking range 2001:2::/48
TUNNEL_NET, VXLAN_PORT, VXLAN_VNI = "198.19.0", 4789, 42     # inner addresses of the tunnel overlay
TUNNEL_NET6 = "2001:2:3:"                                    # the overlay's IPv6 (overlay_ip_version 6)
GENEVE_PORT = 6081
TUNNELS = ("vxlan", "geneve")


def tunnel_overhead(ip_version: int) -> int:
    """Bytes a VXLAN or GENEVE (no options) tunnel adds: inner Ethernet 14 + header 8 + UDP 8 + outer IP."""
    return 14 + 8 + 8 + (40 if ip_version == 6 else 20)
IPERF_PORT = 5201
IPV4_TCP_HDR = 40
#: iptables ``-m length`` floor of a "data segment" for ``loss``: bigger than any handshake,
#: ACK or iperf3 control message, smaller than the smallest full segment the lab allows.
DATA_MIN_IP_LEN = 128
MAX_DURATION_S = 3600.0
#: iperf3 gets the duration plus this long to connect, finish and report
IPERF_GRACE_S = 30.0
IPV6_TCP_HDR = 60


def _check_tc_word(name: str, value: str | None, pattern: str, example: str) -> None:
    if value is not None and not re.fullmatch(pattern, value):
        raise ValueError(f"cannot read {name} {value!r}: write it like {example}")


def _duration_s(value) -> float | None:
    """iperf3 -t seconds from 8, 8.0 or '8s'; finite and within (0, 1 h]."""
    if value is None:
        return None
    if isinstance(value, str):
        s = parse_time(value) / 1e9
    else:
        s = float(value)
    if not math.isfinite(s) or s <= 0 or s > MAX_DURATION_S:
        raise ValueError(f"duration {value!r} must be more than 0 s and at most {MAX_DURATION_S:g} s, e.g. 8s")
    return s


@dataclass(frozen=True)
class LabSettings:
    """One lab experiment. Sizes in bytes, rates in bit/s; ``None`` means the kernel's default.

    Pathologies, each one kernel mechanism (the ``commands`` of a run show it):

    - ``drop_gso``: the router drops every forwarded skb longer than its egress MTU,
      as a device that cannot segment (report 001): ``iptables -A FORWARD -i <router-in>
      -m length --length MTU+1:65535 -j DROP``. On veth the sender's TSO/GSO super-packets
      reach the router whole, so these are exactly its GSO skbs.
    - ``loss``: random loss of each data segment with probability ``loss``, at the router:
      ``iptables -A FORWARD -i <router-in> -m length --length 128:65535 -m statistic --mode
      random --probability P -j DROP`` (ACKs and iperf3's control messages are shorter and
      pass). It is per segment because the sender's veth is then set ``tso off`` (GSO stays
      on): TCP builds the same GSO super-packets, but they are segmented in software at the
      sender's transmit, so the router forwards (and drops) single MSS segments, as a wire
      after a hardware-TSO NIC carries them.
    - ``blackhole_mtu``: the router's egress MTU is N (as ``path_mtu``) and the ICMP
      "fragmentation needed" it would send back is dropped in its OUTPUT chain
      (``iptables -A OUTPUT -p icmp --icmp-type fragmentation-needed -j DROP``), so
      oversize packets vanish: a PMTU black hole.
    - ``mtu_probing``: ``net.ipv4.tcp_mtu_probing`` in the sender (0 off, 1 after a black
      hole is detected, 2 always).
    - ``rate`` with ``queue``: ``tc qdisc add dev <router-out> root tbf rate R burst B limit
      Q`` on the router egress (``burst`` defaults to 64 KB; a GSO skb bigger than the bucket
      is segmented by tbf itself).
    """

    mss: int | None = None            # iperf3 -M (TCP_MAXSEG); payload = mss - TCP options
    mtu: int = 1500                   # every link
    path_mtu: int | None = None       # the router's egress only (the "1492 hop")
    clamp: int | None = None          # iptables TCPMSS --set-mss on the router's FORWARD SYNs
    tso: bool = True                  # sender
    gso: bool = True                  # sender
    tx_csum: bool = True              # sender
    gro: bool = True                  # receiver
    rx_csum: bool = True              # receiver
    router_tso: bool = False          # router egress
    router_gso: bool = True           # router egress
    timestamps: bool = True           # net.ipv4.tcp_timestamps in sender and receiver
    cc: str = "cubic"                 # iperf3 -C (TCP_CONGESTION): a new namespace would take the host's
    delay: str | None = None          # netem delay on the bottleneck egress, e.g. "10ms"
    rate: int | str | None = None     # tbf rate on the bottleneck egress, e.g. "1Gbit"
    queue: int | str | None = None    # tbf limit (bytes) with ``rate``
    burst: int | str | None = None    # tbf burst (bytes) with ``rate``
    loss: float | str | None = None   # per data segment at the router, e.g. 0.01 or "1%"
    drop_gso: bool = False            # the router drops skbs over its egress MTU
    blackhole_mtu: int | None = None  # router egress MTU, ICMP frag-needed suppressed
    mtu_probing: int | None = None    # net.ipv4.tcp_mtu_probing in the sender
    bytes: int | str | None = "4M"    # iperf3 -n (or use duration_s)
    duration_s: float | str | None = None   # iperf3 -t
    topology: str = "router"          # "router" (three namespaces) or "direct" (two)
    captures: tuple[str, ...] = ("router-in", "router-out", "rcv")
    snaplen: int = 128
    gro_flush_timeout_ns: int = 0     # receiver sysfs, batches NAPI polls
    napi_defer_hard_irqs: int = 0     # receiver sysfs
    iperf_timeout_s: float | None = None   # None: duration + 30 s, or 60 s for a byte count
    measure_rtt: bool = False         # TCP ping-pong over the idle path before iperf3 (LabResult.base_rtt_ns)
    ip_version: int = 4               # 4, or 6 (addresses in 2001:2::/48)
    gso_max_size: int | None = None   # BIG TCP: the sender's gso_max_size (IPv6) / gso_ipv4_max_size (IPv4)
    tunnel: str | None = None         # "vxlan"/"geneve": TCP (IPv4) runs over an overlay; ip_version is the underlay's
    tunnel_csum: bool = False         # outer UDP checksums (SKB_GSO_UDP_TUNNEL_CSUM): udpcsum, or IPv6 without udp6zerocsumtx
    overlay_ip_version: int = 4       # the TCP packets' IP inside the tunnel: 4 (198.19.0.0/24) or 6 (2001:2:3::/64)
    tunnel_flowlabel: str | None = None   # vxlan "flowlabel": "inherit" (the inner IPv6 flow label) or a number
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        norm = object.__setattr__
        norm(self, "bytes", None if self.bytes is None else parse_size(self.bytes))
        norm(self, "duration_s", _duration_s(self.duration_s))
        for name in ("rate", "queue", "burst"):
            v = getattr(self, name)
            if v is not None:
                norm(self, name, parse_rate(v, minimum=0) if name == "rate" else parse_size(v))
        if self.loss is not None:
            norm(self, "loss", parse_fraction(self.loss))
        if self.topology not in ("router", "direct"):
            raise ValueError(f"topology {self.topology!r}: choose 'router' or 'direct'")
        if self.cc not in ("cubic", "reno", "bbr"):
            raise ValueError(f"congestion control {self.cc!r}: choose cubic, reno or bbr")
        for name in ("mtu", "path_mtu", "blackhole_mtu"):
            v = getattr(self, name)
            if v is not None and not 576 <= v <= 65535:
                raise ValueError(f"{name} {v} is out of range: an IPv4 link MTU is 576..65535")
        if self.blackhole_mtu is not None and self.path_mtu not in (None, self.blackhole_mtu):
            raise ValueError("--blackhole-mtu sets the router egress MTU itself: drop --path-mtu")
        if self.mtu_probing not in (None, 0, 1, 2):
            raise ValueError(f"mtu_probing {self.mtu_probing!r}: net.ipv4.tcp_mtu_probing is 0, 1 or 2")
        if self.ip_version not in (4, 6):
            raise ValueError(f"ip_version {self.ip_version}: choose 4 or 6")
        if self.gso_max_size is not None and not 65536 <= self.gso_max_size <= 524280:
            raise ValueError(f"gso_max_size {self.gso_max_size} is out of range: BIG TCP takes 65536..524280")
        if self.tunnel not in (None, *TUNNELS) or (self.tunnel and self.topology != "router"):
            raise ValueError(f"tunnel {self.tunnel!r}: the lab has 'vxlan' or 'geneve', with the router topology")
        if self.overlay_ip_version not in (4, 6) or (self.overlay_ip_version == 6 and not self.tunnel):
            raise ValueError(f"overlay_ip_version {self.overlay_ip_version}: 4 or 6, and 6 needs a tunnel")
        if self.tunnel_flowlabel is not None and (self.tunnel != "vxlan" or self.ip_version != 6 or not (
                self.tunnel_flowlabel == "inherit" or self.tunnel_flowlabel.isdigit())):
            raise ValueError(f"tunnel_flowlabel {self.tunnel_flowlabel!r}: 'inherit' or a number, "
                             "for vxlan over an IPv6 underlay")
        if self.ip_version == 6 and (self.clamp or self.loss or self.drop_gso or self.blackhole_mtu):
            raise ValueError("clamp, loss, drop_gso and blackhole_mtu use iptables rules for IPv4 only: "
                             "drop them with ip_version 6")
        hdr = self.inner_ip_tcp_hdr
        if self.mss is not None and not 88 <= self.mss <= self.mtu - hdr:
            raise ValueError(f"MSS {self.mss} does not fit: iperf3 -M takes 88..{self.mtu - hdr} "
                             f"with MTU {self.mtu} (IPv{self.ip_version} + TCP 20 leave {self.mtu - hdr})")
        if self.clamp is not None and not 88 <= self.clamp <= 65495:
            raise ValueError(f"clamp {self.clamp} is out of range: TCPMSS --set-mss takes 88..65495")
        if self.topology == "direct" and (self.clamp or self.path_mtu or self.drop_gso or self.blackhole_mtu
                                          or self.loss):
            raise ValueError("--clamp, --path-mtu, --drop-gso, --blackhole-mtu and --loss need the router topology")
        if (self.bytes is None) == (self.duration_s is None):
            raise ValueError("give either bytes (iperf3 -n) or duration_s (iperf3 -t), not both")
        if self.bytes is not None and not 1 <= self.bytes <= 1 << 32:
            raise ValueError(f"bytes {self.bytes} is out of range (1 .. 4G)")
        _check_tc_word("delay", self.delay, r"\d+(\.\d+)?(us|ms|s)", "10ms")
        if self.rate is not None and not 8_000 <= self.rate <= 100 * 10**9:
            raise ValueError(f"rate {self.rate} bit/s is out of range: tbf takes 8kbit..100Gbit, e.g. 500Mbit")
        if (self.queue is not None or self.burst is not None) and self.rate is None:
            raise ValueError("--queue and --burst size the tbf of --rate-limit: give --rate-limit too")
        for name in ("queue", "burst"):
            v = getattr(self, name)
            if v is not None and not self.mtu + 14 <= v <= 1 << 30:
                raise ValueError(f"{name} {v} bytes is out of range: at least one frame "
                                 f"({self.mtu + 14} bytes) and at most 1 GiB")
        if self.loss is not None and self.loss > 0.5:
            raise ValueError(f"loss {self.loss:g} is too high for a TCP experiment (at most 0.5 = 50%)")
        bad = [p for p in self.captures if p not in self.points]
        if bad:
            raise ValueError(f"capture point(s) {bad} do not exist in the {self.topology} "
                             f"topology; choose from {list(self.points)}")
        if self.gro_flush_timeout_ns < 0 or self.napi_defer_hard_irqs < 0:
            raise ValueError("gro_flush_timeout and napi_defer_hard_irqs cannot be negative")
        if self.snaplen < 96:
            raise ValueError(f"snaplen {self.snaplen} cuts TCP headers: use at least 96")
        if self.iperf_timeout_s is None:
            norm(self, "iperf_timeout_s", 60.0 if self.duration_s is None else self.duration_s + IPERF_GRACE_S)

    @property
    def ip_tcp_hdr(self) -> int:
        """IP + TCP header bytes without options (40 for IPv4, 60 for IPv6)."""
        return IPV6_TCP_HDR if self.ip_version == 6 else IPV4_TCP_HDR

    @property
    def inner_ip_tcp_hdr(self) -> int:
        """IP + TCP header bytes of the TCP packets (an overlay's own IP version)."""
        if self.tunnel:
            return IPV6_TCP_HDR if self.overlay_ip_version == 6 else IPV4_TCP_HDR
        return self.ip_tcp_hdr

    @property
    def points(self) -> tuple[str, ...]:
        """Capture points of the topology, in path order."""
        return ("snd", "router-in", "router-out", "rcv") if self.topology == "router" else ("snd", "rcv")

    @property
    def egress_mtu(self) -> int:
        """The MTU of the router's egress (the narrow hop): blackhole_mtu, path_mtu or mtu."""
        return self.blackhole_mtu or self.path_mtu or self.mtu

    @property
    def sender_tso(self) -> bool:
        """TSO on the sender's veth: off with ``loss`` so the wire carries single segments."""
        return self.tso and self.loss is None

    def expected_payload(self) -> int:
        """The full-segment payload (gso_size) TCP should pick for these settings.

        min(MTU on the path, the MSS clamps) minus IP+TCP headers minus the
        12 bytes of the timestamp option (the iperf3 -M value is a TCP_MAXSEG,
        which excludes options just like the SYN's MSS).
        """
        opts = 12 if self.timestamps else 0
        mss = min(self.mtu, self.egress_mtu) - self.ip_tcp_hdr
        if self.tunnel:                   # the tunnel device's MTU: the link's minus the encapsulation
            mss = self.mtu - tunnel_overhead(self.ip_version) - self.inner_ip_tcp_hdr
        for cap in (self.mss, self.clamp):
            if cap:
                mss = min(mss, cap)
        return mss - opts

    def to_dict(self) -> dict:
        d = asdict(self)
        d["captures"] = list(self.captures)
        d.pop("extra")
        return d


@dataclass
class Iface:
    ns: str
    name: str
    addr: str


class Topology:
    """Builds and destroys the namespaces of one lab run; records every command."""

    def __init__(self, settings: LabSettings, tag: int | str, commands: list[str] | None = None):
        self.s = settings
        self.tag = tag
        self.commands = commands if commands is not None else []
        roles = ("snd", "rtr", "rcv") if settings.topology == "router" else ("snd", "rcv")
        self.ns = {r: safety.ns_name(tag, r) for r in roles}
        self.created: list[str] = []
        snd_net, rcv_net = (SENDER_NET6 + ":", RECEIVER_NET6 + ":") if settings.ip_version == 6 else \
            (SENDER_NET + ".", RECEIVER_NET + ".")
        if settings.topology == "router":
            self.ifaces = {
                "snd": Iface(self.ns["snd"], "oklsnd0", f"{snd_net}1"),
                "router-in": Iface(self.ns["rtr"], "oklrin0", f"{snd_net}2"),
                "router-out": Iface(self.ns["rtr"], "oklrout0", f"{rcv_net}1"),
                "rcv": Iface(self.ns["rcv"], "oklrcv0", f"{rcv_net}2"),
            }
        else:
            self.ifaces = {
                "snd": Iface(self.ns["snd"], "oklsnd0", f"{snd_net}1"),
                "rcv": Iface(self.ns["rcv"], "oklrcv0", f"{snd_net}2"),
            }

    @property
    def sender_ip(self) -> str:
        """The TCP sender's address (inside the overlay when there is a tunnel)."""
        return self.overlay_addr(1) if self.s.tunnel else self.ifaces["snd"].addr

    @property
    def receiver_ip(self) -> str:
        return self.overlay_addr(2) if self.s.tunnel else self.ifaces["rcv"].addr

    def overlay_addr(self, host: int) -> str:
        """The overlay address of host 1 (sender) or 2 (receiver)."""
        return f"{TUNNEL_NET6}:{host}" if self.s.overlay_ip_version == 6 else f"{TUNNEL_NET}.{host}"

    # -- command helpers -------------------------------------------------
    def sh(self, cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Run a command, record it, raise RuntimeError with its stderr on failure."""
        self.commands.append(shlex.join(cmd))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if check and p.returncode != 0:
            raise RuntimeError(f"lab command failed: {shlex.join(cmd)}: {p.stderr.strip() or p.stdout.strip()}")
        return p

    def nsx(self, ns: str, cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return self.sh(["ip", "netns", "exec", ns] + cmd, check)

    # -- build -------------------------------------------------------------
    def build(self) -> None:
        s = self.s
        for ns in self.ns.values():
            self.sh(["ip", "netns", "add", ns])
            self.created.append(ns)
            self.sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            if s.ip_version == 6:
                # no DAD on the link-local addresses either: while they are tentative, neighbour
                # discovery cannot run, the first SYN is lost (1 s retry) and TCP starts at cwnd 1
                self.nsx(ns, ["sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0"])
        if s.topology == "router":
            self._veth("snd", "router-in", s.mtu, s.mtu)
            # the narrow hop is the router's egress only: the receiver keeps the full MTU and
            # advertises it, so without a clamp the sender must learn the hop by PMTU discovery
            self._veth("router-out", "rcv", s.egress_mtu, s.mtu)
            v6 = s.ip_version == 6
            self.nsx(self.ns["rtr"], ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1" if v6
                                      else "net.ipv4.ip_forward=1"])
            fam = ["-6"] if v6 else []
            self.sh(["ip", "-n", self.ns["snd"], *fam, "route", "add", "default", "via",
                     self.ifaces["router-in"].addr])
            self.sh(["ip", "-n", self.ns["rcv"], *fam, "route", "add", "default", "via",
                     self.ifaces["router-out"].addr])
        else:
            self._veth("snd", "rcv", s.mtu, s.mtu)
        for role in ("snd", "rcv"):
            self.nsx(self.ns[role], ["sysctl", "-qw", f"net.ipv4.tcp_timestamps={int(s.timestamps)}"])
        if s.mtu_probing is not None:
            self.nsx(self.ns["snd"], ["sysctl", "-qw", f"net.ipv4.tcp_mtu_probing={s.mtu_probing}"])
        onoff = lambda b: "on" if b else "off"  # noqa: E731
        self._ethtool("snd", tx=onoff(s.tx_csum), tso=onoff(s.sender_tso), gso=onoff(s.gso))
        self._ethtool("rcv", rx=onoff(s.rx_csum), gro=onoff(s.gro))
        if s.topology == "router":
            self._ethtool("router-out", tso=onoff(s.router_tso), gso=onoff(s.router_gso))
            if s.tunnel:                  # software tunnel GSO at the router's egress too
                out = self.ifaces["router-out"]
                self.nsx(out.ns, ["ethtool", "-K", out.name, "tx-udp_tnl-segmentation", onoff(s.router_tso),
                                  "tx-udp_tnl-csum-segmentation", onoff(s.router_tso)])
            if s.clamp:
                self.nsx(self.ns["rtr"], ["iptables", "-t", "mangle", "-A", "FORWARD", "-p", "tcp",
                                          "--tcp-flags", "SYN,RST", "SYN", "-j", "TCPMSS",
                                          "--set-mss", str(s.clamp)])
            self._pathologies()
        if s.gso_max_size:
            knob = "gso_max_size" if s.ip_version == 6 else "gso_ipv4_max_size"
            snd = self.ifaces["snd"]
            self.sh(["ip", "-n", snd.ns, "link", "set", "dev", snd.name, knob, str(s.gso_max_size)])
        if s.gro_flush_timeout_ns or s.napi_defer_hard_irqs:
            rcv = self.ifaces["rcv"]
            for knob, v in (("gro_flush_timeout", s.gro_flush_timeout_ns),
                            ("napi_defer_hard_irqs", s.napi_defer_hard_irqs)):
                self.nsx(rcv.ns, ["sh", "-c", f"echo {int(v)} > /sys/class/net/{rcv.name}/{knob}"])
        self._shape()
        if s.tunnel:
            self._tunnel()

    def _tunnel(self) -> None:
        """A VXLAN or GENEVE device in the sender and the receiver, over the routed underlay."""
        s = self.s
        ends = (("snd", self.ifaces["snd"], self.ifaces["rcv"].addr, 1),
                ("rcv", self.ifaces["rcv"], self.ifaces["snd"].addr, 2))
        if s.ip_version == 6:             # IPv6 underlay: checksums unless udp6zerocsumtx (and rx to accept them)
            csum = [] if s.tunnel_csum else ["udp6zerocsumtx", "udp6zerocsumrx"]
        else:
            csum = ["udpcsum" if s.tunnel_csum else "noudpcsum"]
        label = ["flowlabel", s.tunnel_flowlabel] if s.tunnel_flowlabel else []
        for role, under, remote, host in ends:
            ns = self.ns[role]
            if s.tunnel == "geneve":      # no local/dev: the route to the remote picks the underlay
                kind = ["geneve", "id", str(VXLAN_VNI), "remote", remote, "dstport", str(GENEVE_PORT)]
            else:
                kind = ["vxlan", "id", str(VXLAN_VNI), "local", under.addr, "remote", remote, "dev", under.name,
                        "dstport", str(VXLAN_PORT)]
            add = ["ip", "-n", ns, "link", "add", "oklvx0", "mtu", str(s.mtu - tunnel_overhead(s.ip_version)),
                   "type", *kind, *csum, *label]
            p = self.sh(add, check=False)
            if p.returncode != 0 and "Unknown device type" in p.stderr:
                raise safety.LabUnavailable(f"This kernel has no {s.tunnel} device (CONFIG_{s.tunnel.upper()}), "
                                            f"so the lab cannot build the {s.tunnel} tunnel; use tunnel vxlan.")
            if p.returncode != 0:
                raise RuntimeError(f"lab command failed: {shlex.join(add)}: {p.stderr.strip()}")
            if s.overlay_ip_version == 4:
                # no IPv6 on the overlay: its late MLD reports would make tcpdump's counters race
                self.nsx(ns, ["sysctl", "-qw", "net.ipv6.conf.oklvx0.disable_ipv6=1"])
                self.sh(["ip", "-n", ns, "addr", "add", f"{self.overlay_addr(host)}/24", "dev", "oklvx0"])
            else:
                self._overlay6(ns)
                self.sh(["ip", "-n", ns, "addr", "add", f"{self.overlay_addr(host)}/64", "dev", "oklvx0", "nodad"])
            self.sh(["ip", "-n", ns, "link", "set", "oklvx0", "up"])
        if s.overlay_ip_version == 6:     # static neighbours: no neighbour discovery inside the tunnel
            for role, peer in (("snd", "rcv"), ("rcv", "snd")):
                mac = self.nsx(self.ns[peer], ["cat", "/sys/class/net/oklvx0/address"]).stdout.strip()
                self.sh(["ip", "-n", self.ns[role], "neigh", "add", self.overlay_addr(2 if peer == "rcv" else 1),
                         "lladdr", mac, "dev", "oklvx0", "nud", "permanent"])

    def _overlay6(self, ns: str) -> None:
        """An IPv6 overlay without link-local address, router solicitations or MLD reports: their late
        packets inside the tunnel would make tcpdump's counters race."""
        for knob in ("addr_gen_mode=1", "router_solicitations=0", "force_mld_version=1", "accept_dad=0"):
            self.nsx(ns, ["sysctl", "-qw", f"net.ipv6.conf.oklvx0.{knob}"])

    def _veth(self, a: str, b: str, mtu_a: int, mtu_b: int) -> None:
        ia, ib = self.ifaces[a], self.ifaces[b]
        self.sh(["ip", "link", "add", ia.name, "netns", ia.ns, "mtu", str(mtu_a), "type", "veth",
                 "peer", "name", ib.name, "netns", ib.ns, "mtu", str(mtu_b)])
        for i in (ia, ib):
            if self.s.ip_version == 6:        # nodad: the address is usable at once
                self.sh(["ip", "-n", i.ns, "addr", "add", f"{i.addr}/64", "dev", i.name, "nodad"])
            else:
                self.sh(["ip", "-n", i.ns, "addr", "add", f"{i.addr}/24", "dev", i.name])
            self.sh(["ip", "-n", i.ns, "link", "set", i.name, "up"])

    def _ethtool(self, point: str, **features: str) -> None:
        names = {"tx": "tx", "rx": "rx", "tso": "tso", "gso": "gso", "gro": "gro"}
        args = []
        for k, v in features.items():
            args += [names[k], v]
        i = self.ifaces[point]
        self.nsx(i.ns, ["ethtool", "-K", i.name] + args)

    def bottleneck(self) -> Iface:
        """The egress that carries delay/rate/loss: the router's egress, or the sender's."""
        return self.ifaces["router-out" if self.s.topology == "router" else "snd"]

    def _pathologies(self) -> None:
        """The router's iptables rules for drop_gso, loss and blackhole_mtu (see LabSettings)."""
        s, rtr, rin = self.s, self.ns["rtr"], self.ifaces["router-in"].name
        if s.drop_gso:
            self.nsx(rtr, ["iptables", "-A", "FORWARD", "-i", rin, "-m", "length", "--length",
                           f"{s.egress_mtu + 1}:65535", "-j", "DROP"])
        if s.loss:
            self.nsx(rtr, ["iptables", "-A", "FORWARD", "-i", rin, "-p", "tcp", "-m", "length", "--length",
                           f"{DATA_MIN_IP_LEN}:65535", "-m", "statistic", "--mode", "random",
                           "--probability", f"{s.loss:.6f}", "-j", "DROP"])
        if s.blackhole_mtu:
            self.nsx(rtr, ["iptables", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "fragmentation-needed",
                           "-j", "DROP"])

    def _shape(self) -> None:
        """netem delay and the tbf rate/queue on the bottleneck egress."""
        s = self.s
        if not (s.delay or s.rate):
            return
        i = self.bottleneck()
        tc = ["tc", "qdisc", "add", "dev", i.name]
        if s.delay and not has_qdisc(i.ns, i.name, "netem"):
            raise safety.LabUnavailable("This kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), "
                                        "so the lab cannot add delay; drop --delay.")
        tbf = []
        if s.rate:
            tbf = ["tbf", "rate", f"{s.rate}bit", "burst", str(s.burst or TBF_BURST_BYTES)]
            tbf += ["limit", str(s.queue)] if s.queue else ["latency", "100ms"]
        if s.delay and tbf:
            self.nsx(i.ns, tc + ["root", "handle", "1:", "netem", "delay", s.delay])
            self.nsx(i.ns, tc + ["parent", "1:1", "handle", "10:"] + tbf)
        elif s.delay:
            self.nsx(i.ns, tc + ["root", "netem", "delay", s.delay])
        else:
            self.nsx(i.ns, tc + ["root"] + tbf)

    def destroy(self) -> None:
        """Delete the run's namespaces (and with them their veths); never raises."""
        for ns in reversed(self.created):
            try:
                safety.delete_namespace(ns, self.commands)
            except Exception:  # noqa: BLE001 - cleanup must go on
                pass
        self.created.clear()


def has_qdisc(ns: str, dev: str, kind: str) -> bool:
    """Whether the kernel offers a qdisc kind (probed on a lab interface, then removed)."""
    p = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", kind],
                       capture_output=True, text=True, timeout=10)
    if p.returncode == 0:
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"],
                       capture_output=True, timeout=10)
        return True
    return False
