"""Network path: encapsulation overheads and per-hop MTU checks.

A hop is a link with an MTU (``sim.scenario.Hop``; here plain ints). Definition used throughout:
``mtu_bytes`` is the MTU of the hop's carrier link (e.g. 1500 for the
Ethernet under a PPPoE session). Encapsulation headers that ride *inside*
that MTU (the hop's own ``encap`` plus any the packet already carries in its
``encap`` column) are subtracted from it: a packet fits when

    ip_len + encap_overhead_bytes(packet.encap | hop.encap) <= mtu_bytes

Overheads (codes.ENC_*): VLAN 4, MPLS 4 per label, PPPoE 8 (6 PPPoE + 2
PPP), VXLAN 50 (outer Ethernet 14 + IP 20 + UDP 8 + VXLAN 8). So PPPoE over
a 1500-byte link leaves 1492 for IP; VXLAN over 1500 leaves 1450. (Whether a
802.1Q tag counts against a real switch's MTU depends on the switch; here it
counts only if you put ENC_VLAN on the hop or the packet.)

A DF packet that does not fit is dropped: silently (``DROP_MTU_SILENT``, a
PMTUD black hole as in report 000) or with an ICMP "fragmentation needed"
sent back (``DROP_MTU_ICMP``), per the hop's ``icmp``. IP fragmentation is not
modelled: a non-DF packet over the MTU passes whole. Rows already dropped
keep their reason. Encapsulation is added and removed on the hop, so the
``encap`` column is not changed.

The TCP simulator can call ``mtu_drop_reason`` (one packet) or
``mtu_check_kernel`` (arrays) from njit code.
"""
from __future__ import annotations

import numpy as np
from ..packet.jit import njit

from ..codes import (DROP_MTU_ICMP, DROP_MTU_SILENT, DROP_NONE, ENC_BYTES, ENC_MPLS, ENC_PPPOE, ENC_VLAN,
                     ENC_VXLAN)
from ..trace import Trace

IPV4_MIN_MTU = 68
ENC_ALL = ENC_VLAN | ENC_MPLS | ENC_PPPOE | ENC_VXLAN
ENC_NAMES = {ENC_VLAN: "VLAN", ENC_MPLS: "MPLS", ENC_PPPOE: "PPPoE", ENC_VXLAN: "VXLAN"}
MAX_MPLS_LABELS = 16


@njit(cache=True)
def encap_overhead_bytes(encap, mpls_labels):
    """Bytes the encapsulation bits ``encap`` add in front of the IP packet (MPLS: 4 per label, >= 1)."""
    n = 0
    if encap & ENC_VLAN:
        n += 4
    if encap & ENC_MPLS:
        n += 4 * max(np.int64(mpls_labels), 1)
    if encap & ENC_PPPOE:
        n += 8
    if encap & ENC_VXLAN:
        n += 50
    return n


@njit(cache=True)
def mtu_drop_reason(ip_len, df, encap, mpls_labels, hop_mtu_bytes, hop_encap, hop_mpls_labels, hop_icmp):
    """DROP_NONE if the packet fits the hop, else DROP_MTU_SILENT/DROP_MTU_ICMP (DF packets only)."""
    labels = max(np.int64(mpls_labels), np.int64(hop_mpls_labels))
    need = np.int64(ip_len) + encap_overhead_bytes(encap | hop_encap, labels)
    if need <= hop_mtu_bytes or not df:
        return DROP_NONE
    return DROP_MTU_ICMP if hop_icmp else DROP_MTU_SILENT


@njit(cache=True)
def mtu_check_kernel(ip_len, df, encap, mpls_labels, drop, hop_mtu_bytes, hop_encap, hop_mpls_labels,
                     hop_icmp, out_drop):
    """``out_drop[i]``: the row's drop reason after the hop (existing drops are kept)."""
    for i in range(len(out_drop)):
        if drop[i] != DROP_NONE:
            out_drop[i] = drop[i]
        else:
            out_drop[i] = mtu_drop_reason(ip_len[i], df[i], encap[i], mpls_labels[i], hop_mtu_bytes,
                                          hop_encap, hop_mpls_labels, hop_icmp)


def _encap_names(encap: int, mpls_labels: int) -> str:
    parts = []
    for bit, name in ENC_NAMES.items():
        if encap & bit:
            b = ENC_BYTES[bit] * (max(mpls_labels, 1) if bit == ENC_MPLS else 1)
            parts.append(f"{name} ({b})")
    return " + ".join(parts) or "no encapsulation"


def check_hop(mtu_bytes: int, encap: int = 0, mpls_labels: int = 1) -> int:
    """The IP MTU of a hop (``mtu_bytes`` minus the overhead of its ``encap`` bits: 1492 for PPPoE over
    1500); ValueError naming the bad field. ``sim.scenario.Hop`` is the hop of the kit; its fields
    (``mtu``, ``encap_bits``, ``mpls_labels``) are what this checks."""
    for name, v in (("mtu_bytes", mtu_bytes), ("encap", encap), ("mpls_labels", mpls_labels)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"hop {name} must be an integer, not {v!r}")
    if not IPV4_MIN_MTU <= mtu_bytes <= 65535:
        raise ValueError(f"hop MTU {mtu_bytes} is outside {IPV4_MIN_MTU}..65535 ({IPV4_MIN_MTU} is the IPv4 minimum)")
    if encap & ~ENC_ALL:
        raise ValueError(f"hop encap {encap:#x} has unknown bits; combine codes.ENC_VLAN, ENC_MPLS, ENC_PPPOE, "
                         f"ENC_VXLAN")
    if not 1 <= mpls_labels <= MAX_MPLS_LABELS:
        raise ValueError(f"hop mpls_labels {mpls_labels} is outside 1..{MAX_MPLS_LABELS}")
    ip_mtu = int(mtu_bytes) - int(encap_overhead_bytes(encap, mpls_labels))
    if ip_mtu < IPV4_MIN_MTU:
        raise ValueError(f"hop MTU {mtu_bytes} minus {_encap_names(encap, mpls_labels)} leaves {ip_mtu} bytes "
                         f"for IP; IPv4 needs at least {IPV4_MIN_MTU}")
    return ip_mtu


def apply_hop(trace: Trace, mtu_bytes: int, encap: int = 0, icmp: bool = False, mpls_labels: int = 1) -> Trace:
    """The trace after a hop of carrier MTU ``mtu_bytes`` adding the ``encap`` bits (codes.ENC_*):
    rows that do not fit are kept, marked in the ``drop`` column (``icmp``: DROP_MTU_ICMP, else
    DROP_MTU_SILENT). With a ``sim.scenario.Hop`` h: ``apply_hop(t, h.mtu, h.encap_bits, h.icmp,
    h.mpls_labels)``."""
    check_hop(mtu_bytes, encap, mpls_labels)
    c = trace.columns
    out = np.empty(len(trace), dtype=c["drop"].dtype)
    mtu_check_kernel(c["ip_len"], c["df"], c["encap"], c["mpls_labels"], c["drop"], int(mtu_bytes),
                     int(encap), int(mpls_labels), bool(icmp), out)
    return trace.replace(drop=out)


def delivered(trace: Trace) -> Trace:
    """Only the rows not dropped."""
    return trace[trace.columns["drop"] == DROP_NONE]


def pass_hop(trace: Trace, mtu_bytes: int, encap: int = 0, icmp: bool = False, mpls_labels: int = 1) -> Trace:
    """The rows that come out of the hop (``delivered(apply_hop(...))``)."""
    return delivered(apply_hop(trace, mtu_bytes, encap, icmp, mpls_labels))


def warmup() -> None:
    t = Trace.from_columns(ip_len=[1500, 1492], df=[True, True])
    apply_hop(t, 1500, ENC_PPPOE)
    apply_hop(t, 1500, ENC_MPLS, icmp=True, mpls_labels=2)
