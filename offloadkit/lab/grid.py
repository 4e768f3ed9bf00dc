"""The oracle grids: lab settings whose captures check the kit against the kernel.

``COMMITTED`` made the small captures in ``data/captures/`` (by
``data/captures/make_captures.py``); ``LIVE`` is what the ``kernel``-marked
tests regenerate on the machine they run on. Every case uses the router
topology: sender (TSO on) -> router (egress ``tso off gso on``) -> receiver
(GRO on unless said), capturing router-in, router-out and rcv.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .runner import run_lab
from .topology import LabSettings

_BASE = LabSettings(bytes="512K")

COMMITTED: dict[str, LabSettings] = {
    "ts-mtu1500": _BASE,
    "nots-mtu1500": replace(_BASE, timestamps=False),
    "ts-mss536": replace(_BASE, mss=536),
    "nots-mss1000": replace(_BASE, mss=1000, timestamps=False),
    "ts-clamp1452-mtu1492": replace(_BASE, clamp=1452, path_mtu=1492),
    "ts-mtu1492-pmtud": replace(_BASE, path_mtu=1492),
    "ts-mtu9000": replace(_BASE, mtu=9000),
    "ts-mss1200-gro-off": replace(_BASE, mss=1200, gro=False),
}

# IPv6 (2001:2::/48) and BIG TCP; committed in data/captures/ipv6/
_V6 = replace(_BASE, ip_version=6)
COMMITTED_IPV6: dict[str, LabSettings] = {
    "v6-ts-mtu1500": _V6,
    "v6-nots-mss1000": replace(_V6, mss=1000, timestamps=False),
    "v6-ts-mtu9000": replace(_V6, mtu=9000),
    # the router's egress MTU 1508: ip6_forward's skb_gso_validate_network_len counts the 8-byte jumbo
    # HBH in every segment (48 + 32 + 1428 > 1500), so at MTU 1500 it refuses BIG TCP packets...
    # (how big TCP's super-packets get depends on the rate: make_captures.py --until-jumbo retries)
    "v6-bigtcp-185000": replace(_V6, gso_max_size=185000, path_mtu=1508, bytes="1M"),
    # ...as this case shows: every jumbo packet is dropped with ICMPv6 "packet too big, mtu 1500"
    "v6-bigtcp-ptb-mtu1500": replace(_V6, gso_max_size=185000),
}

# TCP over a VXLAN overlay (IPv4 underlay): the router's egress segments the tunnel in software
COMMITTED_VXLAN: dict[str, LabSettings] = {
    "vxlan-ts-mtu1500": replace(_BASE, tunnel="vxlan"),
    "vxlan-csum-ts-mtu1500": replace(_BASE, tunnel="vxlan", tunnel_csum=True),
}
# VXLAN over an IPv6 underlay (2001:2::/48), outer UDP checksums computed or zero (udp6zerocsumtx);
# in data/captures/tunnel/ (snaplen 160: the inner TCP header ends at byte 136). GENEVE cases need
# a kernel with CONFIG_GENEVE (the capture machine's has none)
COMMITTED_TUNNEL: dict[str, LabSettings] = {
    "vxlan6-ts-mtu1500": replace(_V6, tunnel="vxlan", tunnel_csum=True, snaplen=160),
    "vxlan6-zerocsum-ts-mtu1500": replace(_V6, tunnel="vxlan", snaplen=160),
}
# IPv6 inside VXLAN (overlay 2001:2:3::/64) over the IPv4 and the IPv6 underlay; in data/captures/overlay6/.
# "flowlabel 0x12345": a fixed non-zero outer IPv6 flow label (vxlan's default is 0; "inherit", the inner
# label through ip_tunnel_get_flowlabel, needs iproute2 >= 6.7, the capture machine's is 6.1)
COMMITTED_OVERLAY6: dict[str, LabSettings] = {
    "vxlan-v6in4-ts-mtu1500": replace(_BASE, tunnel="vxlan", overlay_ip_version=6, snaplen=160),
    "vxlan6-v6in6-ts-mtu1500": replace(_V6, tunnel="vxlan", tunnel_csum=True, overlay_ip_version=6, snaplen=176),
    "vxlan6-v6in6-label-ts-mtu1500": replace(_V6, tunnel="vxlan", tunnel_csum=True, overlay_ip_version=6,
                                             tunnel_flowlabel=str(0x12345), snaplen=176),
}

_LIVE_BASE = LabSettings(bytes="1M")
LIVE: dict[str, LabSettings] = {
    "ts-mss536": replace(_LIVE_BASE, mss=536),
    "nots-mss1460": replace(_LIVE_BASE, mss=1460, timestamps=False),
    "ts-mss1100": replace(_LIVE_BASE, mss=1100),
    "ts-clamp1452-mtu1492": replace(_LIVE_BASE, clamp=1452, path_mtu=1492),
    "nots-clamp1300-mtu1492": replace(_LIVE_BASE, clamp=1300, path_mtu=1492, timestamps=False),
    "nots-mtu9000": replace(_LIVE_BASE, mtu=9000, timestamps=False),
    "ts-mss1448-gro-off": replace(_LIVE_BASE, mss=1448, gro=False),
}
LIVE_IPV6: dict[str, LabSettings] = {
    "v6-ts-mss1100": replace(_LIVE_BASE, ip_version=6, mss=1100),
    "v6-bigtcp-120000": replace(_LIVE_BASE, ip_version=6, gso_max_size=120000, path_mtu=1508),
}


def capture_case(name: str, settings: LabSettings, out_root: str | Path) -> dict:
    """Run one case into ``out_root/name/`` and write its ``settings.json``; returns that dict."""
    out = Path(out_root) / name
    out.mkdir(parents=True, exist_ok=True)
    r = run_lab(settings, out)
    info = {
        "name": name,
        "settings": settings.to_dict(),
        "expected_gso_size": settings.expected_payload(),
        "sender_ip": r.sender_ip,
        "receiver_ip": r.receiver_ip,
        "goodput_bps": r.goodput_bps,
        "retransmits": r.retransmits,
        "capture_stats": r.capture_stats,
        "files": {p: Path(f).name for p, f in r.captures.items()},
        "commands": [c.replace(str(out), "$OUT") for c in r.commands],
    }
    (out / "settings.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def load_case(case_dir: str | Path) -> dict:
    """A captured case: its settings.json with absolute file paths under ``paths``."""
    d = Path(case_dir)
    info = json.loads((d / "settings.json").read_text())
    info["paths"] = {p: str(d / f) for p, f in info["files"].items()}
    info["dir"] = str(d)
    return info


_TCP_BASE = LabSettings(bytes=None, duration_s=8, captures=())
#: issue 16's pathologies: ``offloadkit lab compare --tcp`` on each; data/lab/tcp-<kernel>.json holds them
TCP: dict[str, LabSettings] = {
    "drop-gso": replace(_TCP_BASE, drop_gso=True),
    "no-tso-loss-1pct": replace(_TCP_BASE, tso=False, gso=False, loss=0.01),
    "blackhole-1400-probing-0": replace(_TCP_BASE, blackhole_mtu=1400, mtu_probing=0),
    "blackhole-1400-probing-1": replace(_TCP_BASE, blackhole_mtu=1400, mtu_probing=1),
    "tbf-500mbit-64kb": replace(_TCP_BASE, rate="500Mbit", queue="64KB"),
}
#: the same kinds with other numbers, kept out of any tuning (held-out checks)
TCP_HELD_OUT: dict[str, LabSettings] = {
    "no-tso-loss-0.3pct": replace(_TCP_BASE, tso=False, gso=False, loss=0.003),
    "blackhole-1300-probing-1": replace(_TCP_BASE, blackhole_mtu=1300, mtu_probing=1),
    "tbf-200mbit-32kb": replace(_TCP_BASE, rate="200Mbit", queue="32KB"),
    "drop-gso-mtu1400": replace(_TCP_BASE, drop_gso=True, path_mtu=1400),
}
