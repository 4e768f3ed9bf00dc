"""Network path: encapsulation overheads and per-hop MTU checks.

A ``Hop`` is a link with an MTU. Definition used throughout:
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
sent back (``DROP_MTU_ICMP``), per ``Hop.icmp``. IP fragmentation is not
modelled: a non-DF packet over the MTU passes whole. Rows already dropped
keep their reason. Encapsulation is added and removed on the hop, so the
``encap`` column is not changed.

The TCP simulator can call ``mtu_drop_reason`` (one packet) or
``mtu_check_kernel`` (arrays) from njit code.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

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


@dataclass(frozen=True)
class Hop:
    """A link with an MTU. ``encap``: codes.ENC_* bits this hop adds inside its MTU;
    ``mpls_labels``: labels pushed when ENC_MPLS; ``icmp``: send ICMP frag-needed on drops."""

    mtu_bytes: int = 1500
    encap: int = 0
    icmp: bool = False
    mpls_labels: int = 1

    def __post_init__(self):
        for name in ("mtu_bytes", "encap", "mpls_labels"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"Hop {name} must be an integer, not {v!r}")
        if not IPV4_MIN_MTU <= self.mtu_bytes <= 65535:
            raise ValueError(f"Hop MTU {self.mtu_bytes} is outside {IPV4_MIN_MTU}..65535 "
                             f"({IPV4_MIN_MTU} is the IPv4 minimum)")
        if self.encap & ~ENC_ALL:
            raise ValueError(f"Hop encap {self.encap:#x} has unknown bits; combine codes.ENC_VLAN, ENC_MPLS, "
                             f"ENC_PPPOE, ENC_VXLAN")
        if not 1 <= self.mpls_labels <= MAX_MPLS_LABELS:
            raise ValueError(f"Hop mpls_labels {self.mpls_labels} is outside 1..{MAX_MPLS_LABELS}")
        if self.ip_mtu_bytes < IPV4_MIN_MTU:
            raise ValueError(f"Hop MTU {self.mtu_bytes} minus {_encap_names(self.encap, self.mpls_labels)} "
                             f"leaves {self.ip_mtu_bytes} bytes for IP; IPv4 needs at least {IPV4_MIN_MTU}")

    @property
    def overhead_bytes(self) -> int:
        return int(encap_overhead_bytes(self.encap, self.mpls_labels))

    @property
    def ip_mtu_bytes(self) -> int:
        """The largest IP packet (without encapsulation of its own) that fits: e.g. 1492 for PPPoE."""
        return self.mtu_bytes - self.overhead_bytes


def apply_hop(trace: Trace, hop: Hop) -> Trace:
    """The trace after ``hop``: rows that do not fit are kept, marked in the ``drop`` column."""
    if not isinstance(hop, Hop):
        raise ValueError(f"apply_hop needs a Hop, not {type(hop).__name__}")
    c = trace.columns
    out = np.empty(len(trace), dtype=c["drop"].dtype)
    mtu_check_kernel(c["ip_len"], c["df"], c["encap"], c["mpls_labels"], c["drop"], hop.mtu_bytes,
                     hop.encap, hop.mpls_labels, bool(hop.icmp), out)
    return trace.replace(drop=out)


def delivered(trace: Trace) -> Trace:
    """Only the rows not dropped."""
    return trace[trace.columns["drop"] == DROP_NONE]


def pass_hop(trace: Trace, hop: Hop) -> Trace:
    """The rows that come out of ``hop`` (``delivered(apply_hop(trace, hop))``)."""
    return delivered(apply_hop(trace, hop))


def warmup() -> None:
    t = Trace.from_columns(ip_len=[1500, 1492], df=[True, True])
    apply_hop(t, Hop(1500, encap=ENC_PPPOE))
    apply_hop(t, Hop(1500, encap=ENC_MPLS, icmp=True, mpls_labels=2))
