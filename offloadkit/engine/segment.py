"""TSO/GSO segmentation, kernel-exact (kernel-offload-spec §1-§1.4), and NIC quirks.

A row whose payload exceeds its gso_size (a TCP super-packet) is replaced by
the segments the segmenting device produces; every other row passes
unchanged. Order is kept and segments share the super-packet's timestamp and
``frame`` (the source row), so a pcap writer can take the payload of segment
``s`` from the source frame at offset ``(s.seq - orig.seq) mod 2**32``.

Per-segment rules of Linux software GSO (``tcp_gso_segment`` + ``skb_segment``):
- ``n = ceil(L / mss)``; segment k carries ``min(mss, L - k*mss)`` bytes at
  ``seq0 + k*mss`` (mod 2**32); options, ack, window, urg copied;
- FIN and PSH only on the last segment; CWR only on the first unless
  ``gso_type & GSO_TCP_ACCECN``; every other flag copied;
- IP ID ``id0 + k`` (mod 2**16), or ``id0`` on every segment with
  ``GSO_TCP_FIXEDID``; IP total length = ip_hlen + tcp_hlen + payload; IP
  header checksum recomputed; TOS, TTL, DF copied;
- TCP checksum: with TX checksum offload the segment stays CHECKSUM_PARTIAL
  and carries the folded pseudo-header sum; without it ``gso_make_checksum``
  writes the full checksum (which may be 0x0000) and the segment is NONE;
- output segments are not GSO skbs: gso_size = gso_segs = gso_type = 0.

The model has no payload bytes: its payload is all zeros (see ``csum_math``),
so full checksums come from header fields.

NIC models (``NicModel`` / ``NIC_MODELS``; kernels take an int code plus an
int64 params array so the TCP simulator can pass them into njit code):

``sw-gso``
    Linux software GSO, as above; ``tx_csum`` chooses PARTIAL vs full.
``hw-tso``
    A device honouring the descriptor MSS: the same segments, with the full
    checksum the device writes on the wire (csum NONE; ``tx_csum`` ignored).
``rtl8139-legacy``
    QEMU's RTL8139C+ large-send emulation before QEMU 7.2 (report 000):
    ignores the descriptor MSS and cuts ``ETH_MTU(1500) - ip_hlen - tcp_hlen``
    bytes (2880 bytes with a 32-byte TCP header -> 1448 + 1432). IP ID
    ``id0 + k``; full checksums computed by the emulation. Quirk kept from
    ``rtl8139_cplus_transmit_one``: PSH/FIN are cleared in the *shared* TCP
    header on the first frame and never restored (only the IP header is
    restored per frame), so a super-packet cut into >= 2 frames loses
    PSH/FIN on every frame, the last included. CWR is not touched.
``rtl8139-legacy-mask12``
    The first "honor large send MSS" patches (Nov 2022, before v3): the
    emulation does cut at the descriptor MSS, but reads it with the 12-bit
    mask ``CP_TC_LGSEN_MSS_MASK ((1 << 12) - 1)`` from a ``txdw0`` whose Tx
    status bits (UNF 25, TES 23, OWC 22, LNKF 21, EXC 20) had already been
    cleared (fixed by "rtl8139: avoid clobbering tx descriptor bits"). The
    12-bit field also picks up LargeSend (bit 27), so the MSS read is
    ``((gso & 0x7ff | 0x800) & ~0x2f0)``: 2316 for gso 988 (MSS 1000 asked),
    2060 for 588: Tobias Fiebig's measurements on qemu-devel, reproduced
    exactly. Flags/IDs/checksums as rtl8139-legacy.
``rtl8139-clobbered``
    Same with the right 11-bit mask but still clobbered status bits: the MSS
    read is ``gso & 0x70f``: 3 for gso 755 (767 asked), 268 for 988 (1000
    asked), the nonsense values in reports.md §000. A read MSS of 0 is
    modelled as the frame sent whole (QEMU 792676c16515 skips offload; older
    QEMU looped forever).
``rtl8139-fixed``
    QEMU >= 7.2 (6d71357a3b65): cuts at the descriptor MSS. Same flag quirk.
``drop-gso``
    A device path that cannot segment (report 001, MPLS without inner
    protocol): every multi-segment skb is dropped with ``drop_reason``
    (DROP_GSO_EPROTONOSUPPORT, or DROP_GSO_EINVAL with mpls_gso loaded);
    the row is kept, unsegmented, with ``drop`` set. Single-segment skbs pass.

For every rtl8139 model a gso_size above 2047 (the 11-bit descriptor field)
never reaches the device: 8139cp's ``ndo_features_check`` (8b7a7048220f,
v4.3) drops TSO for it and the kernel segments in software (``hw-tso`` rules).

PSH on GSO packets is the *sender's* doing, not the segmenter's: since
"tcp: force a PSH flag on TSO packets" (Eric Dumazet, net-next Sep 2019,
v5.4) ``__tcp_transmit_skb`` sets PSH on every packet with pcount > 1, so
software GSO puts it on each super-packet's last segment. The 4.4 guest of
seed 000 sends ``Flags [.]`` super-packets. ``tcp_forces_psh(kernel)`` tells
the TCP simulator which behaviour a kernel version has.

IPv6 (``ipv6_gso_segment`` + ``tcp6_gso_segment``): the same seq, flag and
TCP checksum rules (pseudo-header over the 128-bit addresses); there is no IP
ID or header checksum (both copied); the payload length of each segment is
its own (Trace ``ip_len`` = ``ip_hlen + tcp_hlen + payload``, ``ip_hlen``
counting the extension headers, which every segment carries); traffic class
(``tos``), flow label and hop limit (``ttl``) are copied.

BIG TCP: a super-packet above 64 KB. IPv4 writes total length 0
(``ip_tot_len_field``); IPv6 writes payload length 0 and an 8-byte hop-by-hop
jumbo header (``hbh_jumbo``), which ``ipv6_hopopt_jumbo_remove`` takes out
before segmenting, so no segment carries it. The rtl8139 models offer TSO for
IPv4 only (8139cp: NETIF_F_TSO, no TSO6): an IPv6 GSO skb is segmented in
software before it (``cp_tso_family``, hw-tso rules).

Rows already dropped pass unchanged. GSO_PARTIAL (UDP tunnels): ``rewrite.gso_partial``. UDP tunnels
(VXLAN, GENEVE): the inner packet is cut here as a plain one; the outer headers per segment
(``__skb_udp_tunnel_segment``) need the frame's bytes and are written by ``rewrite.tunnel``.

Calling from njit code (the TCP simulator): the per-packet building blocks
``nic_chunk_size(code, params, gso_size, ip_hlen, tcp_hlen)``,
``nic_effective(code, gso_size)``, ``segments_for(L, chunk)``,
``segment_payload(L, chunk, k, n)``, ``segment_flags(flags, k, n, gso_type,
effective_code)``, ``segment_ip_id(id0, k, gso_type, effective_code)``; the
array passes ``segment_count_kernel`` -> ``segment_base_sums_kernel`` ->
``segment_fill_kernel`` (two passes, count then fill, into caller-owned
output arrays that a loop can reuse). ``NicModel(...).params()`` gives the
int64 params array; codes are the ``NIC_*`` constants.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..codes import (ACK, CSUM_NONE, CSUM_PARTIAL, CWR, DROP_GSO_EINVAL, DROP_GSO_EPROTONOSUPPORT, FIN,
                     GSO_TCP_ACCECN, GSO_TCP_FIXEDID, NIC_DROP_GSO, NIC_HW_TSO, NIC_MODELS, NIC_RTL8139_CLOBBERED,
                     NIC_RTL8139_FIXED, NIC_RTL8139_LEGACY, NIC_RTL8139_MASK12, NIC_SW_GSO, PSH)
from ..trace import FIELDS, LazyColumns, Trace, repeat_rows
from .csum_math import (IPPROTO_TCP, csum_finish, fold16, ip_base_sum, ip_tot_len_field, pseudo_addr_sum,
                        tcp_base_sum, tcp_flags_word, tcp_options_sum_kernel, u32_sum)

# -- NIC models ----------------------------------------------------------
# the model table NIC_MODELS (name -> code, MSS mask bits, status bits clobbered) and the NIC_* codes: codes.py

# nic_params slots (int64 array of NIC_PARAMS_LEN)
P_DROP_REASON = 0        # drop-gso: codes.DROP_* recorded on dropped skbs
P_LEGACY_MTU = 1         # rtl8139-legacy: QEMU's ETH_MTU (1500)
P_MSS_MASK_BITS = 2      # rtl8139 MSS read: 11 (datasheet) or 12 (old QEMU mask)
P_STATUS_CLOBBER = 3     # rtl8139 MSS read: 1 if Tx status bits were cleared first
NIC_PARAMS_LEN = 4

RTL8139_MSS_MAX = 0x7FF            # 11-bit descriptor field (8139cp MSSMask)
RTL8139_LGSEN_IN_FIELD = 0x800     # LargeSend (bit 27) seen through a 12-bit mask at shift 16
RTL8139_STATUS_IN_FIELD = 0x2F0    # Tx status bits 25, 23, 22, 21, 20 at shift 16

TCP_PSH_ON_GSO_SINCE = (5, 4)      # "tcp: force a PSH flag on TSO packets"
TCP_MIN_SND_MSS = 48               # sysctl_tcp_min_snd_mss default
TCP_MIN_GSO_SIZE = 8               # TCP_MIN_SND_MSS - MAX_TCP_OPTION_SPACE
MAX_GSO_SIZE = 65535 - 20 - 20
GRO_LEGACY_MAX_SIZE = 65536        # above it an IPv6 skb carries the hop-by-hop jumbo header
HOP_JUMBO_HLEN = 8                 # sizeof(struct hop_jumbo_hdr)


@dataclass(frozen=True)
class NicModel:
    """A segmenting device. ``name`` is one of ``NIC_MODELS``.

    ``drop_reason`` (drop-gso only): DROP_GSO_EPROTONOSUPPORT or DROP_GSO_EINVAL.
    ``legacy_mtu_bytes`` (rtl8139-legacy only): the MTU QEMU hard-coded (1500).
    """

    name: str = "sw-gso"
    drop_reason: int = DROP_GSO_EPROTONOSUPPORT
    legacy_mtu_bytes: int = 1500

    def __post_init__(self):
        if self.name not in NIC_MODELS:
            raise ValueError(f"unknown NIC model {self.name!r}; choose one of {', '.join(NIC_MODELS)}")
        if self.drop_reason not in (DROP_GSO_EPROTONOSUPPORT, DROP_GSO_EINVAL):
            raise ValueError(f"drop_reason must be DROP_GSO_EPROTONOSUPPORT ({DROP_GSO_EPROTONOSUPPORT}) "
                             f"or DROP_GSO_EINVAL ({DROP_GSO_EINVAL}), not {self.drop_reason}")
        if not 68 <= int(self.legacy_mtu_bytes) <= 65535:
            raise ValueError(f"legacy_mtu_bytes {self.legacy_mtu_bytes} is outside 68..65535")

    @property
    def code(self) -> int:
        return NIC_MODELS[self.name][0]

    def params(self) -> np.ndarray:
        p = np.zeros(NIC_PARAMS_LEN, dtype=np.int64)
        p[P_DROP_REASON] = self.drop_reason
        p[P_LEGACY_MTU] = self.legacy_mtu_bytes
        p[P_MSS_MASK_BITS] = NIC_MODELS[self.name][1]
        p[P_STATUS_CLOBBER] = NIC_MODELS[self.name][2]
        return p


def nic_model(nic) -> NicModel:
    """A NicModel from a name or a NicModel."""
    if isinstance(nic, NicModel):
        return nic
    if isinstance(nic, str):
        return NicModel(nic)
    raise ValueError(f"nic must be a NIC model name or NicModel, not {type(nic).__name__}")


def tcp_forces_psh(kernel: tuple[int, int]) -> bool:
    """Whether a kernel version's TCP sets PSH on every GSO packet (>= 5.4)."""
    return tuple(kernel[:2]) >= TCP_PSH_ON_GSO_SINCE


# -- MSS from MTU (spec §1.4) ----------------------------------------------

def tcp_options_bytes(timestamps: bool = True, sack_blocks: int = 0) -> int:
    """Option bytes on an established connection's data segments (12 for timestamps, 4 + 8/SACK block)."""
    if not 0 <= sack_blocks <= 4:
        raise ValueError(f"sack_blocks {sack_blocks} is outside 0..4")
    n = 12 if timestamps else 0
    if sack_blocks:
        n += 4 + 8 * sack_blocks
    if n > 40:
        raise ValueError(f"{sack_blocks} SACK blocks do not fit in 40 option bytes with timestamps")
    return n


def mss_from_mtu(mtu: int, timestamps: bool = True, sack_blocks: int = 0, clamp: int | None = None,
                 ip_hlen: int = 20) -> int:
    """gso_size (payload bytes per segment) for a path MTU, as ``tcp_current_mss`` computes it.

    ``clamp`` is the peer's MSS option / TCP_MAXSEG (without options); it
    applies before options are subtracted. Kernel floor: TCP_MIN_SND_MSS (48)
    before subtracting options. MTU 1500 with timestamps -> 1448; clamp 1452 -> 1440.
    """
    mtu, ip_hlen = int(mtu), int(ip_hlen)
    if not 68 <= mtu <= 65535:
        raise ValueError(f"MTU {mtu} is outside 68..65535 (68 is the IPv4 minimum)")
    if ip_hlen not in range(20, 61, 4):
        raise ValueError(f"IP header length {ip_hlen} must be 20..60 in steps of 4")
    mss = mtu - ip_hlen - 20
    if clamp is not None:
        if not 1 <= int(clamp) <= 65535:
            raise ValueError(f"MSS clamp {clamp} is outside 1..65535")
        mss = min(mss, int(clamp))
    mss = max(mss, TCP_MIN_SND_MSS)
    return mss - tcp_options_bytes(timestamps, sack_blocks)


def check_mss_fits(gso_size: int, mtu: int, timestamps: bool = True, sack_blocks: int = 0,
                   ip_hlen: int = 20) -> int:
    """Raise ValueError if segments of ``gso_size`` payload exceed ``mtu``; return the room left."""
    opts = tcp_options_bytes(timestamps, sack_blocks)
    room = int(mtu) - ip_hlen - 20 - opts
    if int(gso_size) < 1:
        raise ValueError(f"MSS {gso_size} must be at least 1 byte")
    if int(gso_size) > room:
        raise ValueError(f"MSS {gso_size} does not fit in MTU {mtu}: IPv4 ({ip_hlen}) + TCP (20) "
                         f"+ options ({opts}) leave {room}")
    return room - int(gso_size)


def check_gso_size(gso_size: int) -> int:
    """The gso_size as an int, or ValueError if Linux GSO could not use it (8..65495)."""
    gso_size = int(gso_size)
    if not TCP_MIN_GSO_SIZE <= gso_size <= MAX_GSO_SIZE:
        raise ValueError(f"MSS {gso_size} is out of range: Linux GSO needs {TCP_MIN_GSO_SIZE} <= MSS "
                         f"<= {MAX_GSO_SIZE} (65535 - IPv4 20 - TCP 20)")
    return gso_size


# -- njit building blocks (callable from other njit code) ------------------

@njit(cache=True)
def rtl8139_read_mss(gso_size, mask_bits, clobber):
    """The MSS QEMU's rtl8139 reads from a LargeSend descriptor carrying ``gso_size``."""
    field = (gso_size & RTL8139_MSS_MAX) | RTL8139_LGSEN_IN_FIELD
    if clobber:
        field &= ~RTL8139_STATUS_IN_FIELD
    return field & ((1 << mask_bits) - 1)


@njit(cache=True)
def nic_effective(nic_code, gso_size):
    """The model that really segments: rtl8139 never sees gso_size > 2047 (software GSO instead)."""
    if nic_code >= NIC_RTL8139_LEGACY and nic_code <= NIC_RTL8139_FIXED and gso_size > RTL8139_MSS_MAX:
        return NIC_HW_TSO
    return nic_code


@njit(cache=True)
def nic_chunk_size(nic_code, nic_params, gso_size, ip_hlen, tcp_hlen):
    """Payload bytes per segment the device cuts a GSO skb into (<= 0: sent whole)."""
    code = nic_effective(nic_code, gso_size)
    if code == NIC_RTL8139_LEGACY:
        return nic_params[P_LEGACY_MTU] - ip_hlen - tcp_hlen
    if code == NIC_RTL8139_MASK12 or code == NIC_RTL8139_CLOBBERED:
        return rtl8139_read_mss(gso_size, nic_params[P_MSS_MASK_BITS], nic_params[P_STATUS_CLOBBER])
    return gso_size


@njit(cache=True)
def cp_tso_family(nic_code, ip_version):
    """The model that segments an skb of this IP version: 8139cp has NETIF_F_TSO but no TSO6,
    so the stack segments IPv6 in software before the rtl8139 models (hw-tso rules: full checksums)."""
    if ip_version == 6 and nic_code >= NIC_RTL8139_LEGACY and nic_code <= NIC_RTL8139_FIXED:
        return NIC_HW_TSO
    return nic_code


@njit(cache=True)
def ipv6_has_hopopt_jumbo(ip_version, hbh_jumbo, ip_len):
    """``ipv6_has_hopopt_jumbo``: an IPv6 skb over GRO_LEGACY_MAX_SIZE whose first header is the jumbo HBH."""
    return ip_version == 6 and hbh_jumbo and ip_len > GRO_LEGACY_MAX_SIZE


@njit(cache=True)
def ipv6_hopopt_jumbo_remove(ip_hlen, ip_version, hbh_jumbo, ip_len):
    """``ipv6_hopopt_jumbo_remove``: the network header length once the jumbo HBH is taken out."""
    if ipv6_has_hopopt_jumbo(ip_version, hbh_jumbo, ip_len):
        return np.int64(ip_hlen) - HOP_JUMBO_HLEN
    return np.int64(ip_hlen)


@njit(cache=True)
def is_gso_row(payload_len, gso_size, ip_version, drop):
    """A row the segmenter acts on: an undropped IPv4 or IPv6 skb with payload above gso_size."""
    return drop == 0 and (ip_version == 4 or ip_version == 6) and gso_size > 0 and payload_len > gso_size


@njit(cache=True)
def segments_for(payload_len, chunk):
    """Number of segments of ``chunk`` bytes (the last one shorter) for ``payload_len``."""
    if chunk <= 0 or payload_len <= chunk:
        return 1
    return (payload_len + chunk - 1) // chunk


@njit(cache=True)
def segment_payload(payload_len, chunk, k, n):
    """Payload bytes of segment k of n."""
    if n == 1:
        return payload_len
    if k < n - 1:
        return chunk
    return payload_len - (n - 1) * chunk


@njit(cache=True)
def segment_flags(flags, k, n, gso_type, code):
    """TCP flags of segment k of n (``code`` from ``nic_effective``)."""
    f = np.int64(flags)
    if code >= NIC_RTL8139_LEGACY and code <= NIC_RTL8139_FIXED:
        if n > 1:
            f &= ~(PSH | FIN)        # cleared in the shared TCP header, never restored
        return f
    if k < n - 1:
        f &= ~(PSH | FIN)
    if k > 0 and (gso_type & GSO_TCP_ACCECN) == 0:
        f &= ~CWR
    return f


@njit(cache=True)
def segment_ip_id(ip_id, k, gso_type, code):
    """IP ID of segment k: incrementing, or fixed with GSO_TCP_FIXEDID (kernel models only)."""
    if (code == NIC_SW_GSO or code == NIC_HW_TSO) and (gso_type & GSO_TCP_FIXEDID) != 0:
        return ip_id
    return (np.int64(ip_id) + k) & 0xFFFF


@njit(cache=True)
def segment_count_kernel(payload_len, gso_size, gso_override, ip_version, ip_hlen, tcp_hlen, drop,
                         nic_code, nic_params, counts):
    """Pass 1: ``counts[i]`` = output rows for input row i; returns their total.

    ``gso_override`` > 0 replaces every row's gso_size (the CLI's --mss).
    """
    total = 0
    for i in range(len(payload_len)):
        g = gso_override if gso_override > 0 else gso_size[i]
        c = 1
        if nic_code != NIC_DROP_GSO and is_gso_row(payload_len[i], g, ip_version[i], drop[i]):
            code = cp_tso_family(nic_code, ip_version[i])
            c = segments_for(payload_len[i], nic_chunk_size(code, nic_params, g, ip_hlen[i], tcp_hlen[i]))
        counts[i] = c
        total += c
    return total


@njit(cache=True)
def segment_base_sums_kernel(ip_version, ip_hlen, tos, df, frag, ttl, src_ip, dst_ip, src_ip6, dst_ip6, sport,
                             dport, ack, window, urg_ptr, options_sum, ip_base, tcp_base, pseudo_base):
    """Per-row checksum parts that segmentation does not change (see ``csum_math``).

    ``pseudo_base``: the pseudo-header's addresses and protocol (IPv4 or IPv6);
    ``ip_base`` is 0 for IPv6 (no header checksum).
    """
    for i in range(len(ip_base)):
        a = pseudo_addr_sum(ip_version[i], src_ip[i], dst_ip[i], src_ip6[i], dst_ip6[i])
        pseudo_base[i] = a + IPPROTO_TCP
        ip_base[i] = 0
        if ip_version[i] == 4:
            ip_base[i] = ip_base_sum(ip_hlen[i], tos[i], df[i], frag[i], ttl[i], src_ip[i], dst_ip[i])
        tcp_base[i] = a + tcp_base_sum(0, 0, sport[i], dport[i], ack[i], window[i], urg_ptr[i], options_sum[i])


@njit(cache=True, inline="always")
def _fill_segments(i, j, n, chunk, code, partial, L, seq0, flags0, id0, gt, ihl, thl, pseudo_addr,
                   ipb, tcpb, o_src_row, o_seq, o_payload_len, o_flags, o_ip_id, o_ip_len, o_ip_csum, o_tcp_csum,
                   o_csum_state, o_gso_size, o_gso_segs, o_gso_type, o_drop):
    """Rows j .. j+n-1 for the n segments of input row i (``ihl`` after jumbo removal).

    IPv4 ID and header checksum; the caller overwrites them for IPv6 (``ipv6_gso_segment``:
    none to write). At most 30 arguments: CPython passes more as a tuple, which numba cannot inline.

    Written column by column with the middle-segment values first and the
    first/last segment fixed afterwards, so that LLVM vectorises the loops.
    Same results as applying segment_payload/flags/ip_id per segment.
    """
    s0 = np.int64(seq0)
    last = n - 1
    pay_last = segment_payload(L, chunk, last, n)
    f_mid = segment_flags(flags0, 1, max(n, 3), gt, code)    # middle segments (first/last fixed below)
    inc = segment_ip_id(0, 1, gt, code)                  # 1, or 0 with FIXEDID
    hdr = ihl + thl
    ck = np.int64(chunk)
    for k in range(n):
        o_src_row[j + k] = i
        o_payload_len[j + k] = ck
        o_seq[j + k] = (s0 + k * ck) & 0xFFFFFFFF
        o_flags[j + k] = f_mid
        o_ip_id[j + k] = (np.int64(id0) + k * inc) & 0xFFFF
        o_ip_len[j + k] = hdr + ck
        o_gso_size[j + k] = 0
        o_gso_segs[j + k] = 0
        o_gso_type[j + k] = 0
        o_drop[j + k] = 0
    o_payload_len[j + last] = pay_last
    o_ip_len[j + last] = hdr + pay_last
    o_flags[j] = segment_flags(flags0, 0, n, gt, code)
    o_flags[j + last] = segment_flags(flags0, last, n, gt, code)
    for k in range(n):
        o_ip_csum[j + k] = csum_finish(ipb + ip_tot_len_field(np.int64(o_ip_len[j + k])) + np.int64(o_ip_id[j + k]))
    if partial:
        mid = fold16(pseudo_addr + thl + ck)
        for k in range(n):
            o_tcp_csum[j + k] = mid
            o_csum_state[j + k] = CSUM_PARTIAL
        o_tcp_csum[j + last] = fold16(pseudo_addr + thl + pay_last)
    else:
        for k in range(n):
            o_tcp_csum[j + k] = csum_finish(tcpb + thl + np.int64(o_payload_len[j + k])
                                            + u32_sum(np.int64(o_seq[j + k]))
                                            + tcp_flags_word(thl, np.int64(o_flags[j + k])))
            o_csum_state[j + k] = CSUM_NONE


@njit(cache=True)
def segment_fill_kernel(counts, payload_len, gso_size, gso_override, ip_version, drop, nic_code, nic_params,
                        tx_csum, seq, flags, ip_id, ip_len, ip_csum, tcp_csum, csum_state, gso_segs,
                        gso_type, ip_hlen, tcp_hlen, hbh_jumbo, ip_base, tcp_base, pseudo_base,
                        o_src_row, o_seq, o_payload_len, o_flags, o_ip_id, o_ip_len, o_ip_csum,
                        o_tcp_csum, o_csum_state, o_gso_size, o_gso_segs, o_gso_type, o_drop, o_ip_hlen,
                        o_hbh_jumbo):
    """Pass 2: write the output rows (sizes from pass 1) into the ``o_*`` arrays.

    ``o_src_row[j]`` is the input row of output row j; the caller copies every
    column not written here from that row. ``ip_base``/``tcp_base``/``pseudo_base``
    come from ``segment_base_sums_kernel`` (only read for rows that are segmented).
    """
    j = 0
    for i in range(len(counts)):
        n = counts[i]
        g = gso_override if gso_override > 0 else gso_size[i]
        gso = is_gso_row(payload_len[i], g, ip_version[i], drop[i])
        if not gso or (n == 1 and nic_code == NIC_DROP_GSO):
            o_src_row[j] = i
            o_seq[j] = seq[i]
            o_payload_len[j] = payload_len[i]
            o_flags[j] = flags[i]
            o_ip_id[j] = ip_id[i]
            o_ip_len[j] = ip_len[i]
            o_ip_csum[j] = ip_csum[i]
            o_tcp_csum[j] = tcp_csum[i]
            o_csum_state[j] = csum_state[i]
            o_gso_size[j] = gso_size[i]
            o_gso_segs[j] = gso_segs[i]
            o_gso_type[j] = gso_type[i]
            o_drop[j] = drop[i]
            o_ip_hlen[j] = ip_hlen[i]
            o_hbh_jumbo[j] = hbh_jumbo[i]
            if gso:                      # drop-gso: a multi-segment skb it cannot segment
                o_drop[j] = nic_params[P_DROP_REASON]
            j += 1
            continue
        family_code = cp_tso_family(nic_code, ip_version[i])
        code = nic_effective(family_code, g)
        chunk = nic_chunk_size(family_code, nic_params, g, ip_hlen[i], tcp_hlen[i])
        ihl = ipv6_hopopt_jumbo_remove(ip_hlen[i], ip_version[i], hbh_jumbo[i], ip_len[i])
        partial = tx_csum and code == NIC_SW_GSO
        _fill_segments(i, j, n, chunk, code, partial, payload_len[i], seq[i], flags[i], ip_id[i], gso_type[i], ihl,
                       np.int64(tcp_hlen[i]), pseudo_base[i], ip_base[i], tcp_base[i], o_src_row, o_seq,
                       o_payload_len, o_flags, o_ip_id, o_ip_len, o_ip_csum, o_tcp_csum, o_csum_state,
                       o_gso_size, o_gso_segs, o_gso_type, o_drop)
        v6 = ip_version[i] == 6
        for k in range(n):
            o_ip_hlen[j + k] = ihl
            o_hbh_jumbo[j + k] = hbh_jumbo[i] and ihl == ip_hlen[i]
            if v6:                       # no IP ID, no header checksum
                o_ip_id[j + k] = ip_id[i]
                o_ip_csum[j + k] = ip_csum[i]
        j += n
    return j


# -- Python API ---------------------------------------------------------------

_OUT = ("seq", "payload_len", "flags", "ip_id", "ip_len", "ip_csum", "tcp_csum", "csum_state",
        "gso_size", "gso_segs", "gso_type", "drop", "ip_hlen", "hbh_jumbo")


def segment_counts(trace: Trace, gso_size: int | None = None, nic="sw-gso") -> np.ndarray:
    """Output rows per input row (1 for rows that pass unchanged)."""
    model = nic_model(nic)
    override = 0 if gso_size is None else check_gso_size(gso_size)
    c = trace.columns
    counts = np.empty(len(trace), dtype=np.int64)
    segment_count_kernel(c["payload_len"], c["gso_size"], override, c["ip_version"], c["ip_hlen"],
                         c["tcp_hlen"], c["drop"], model.code, model.params(), counts)
    return counts


def segment(trace: Trace, gso_size: int | None = None, nic="sw-gso", tx_csum: bool = True) -> Trace:
    """Segment every super-packet of ``trace`` as the device ``nic`` does.

    ``gso_size``: None uses each row's gso_size column (rows with 0 are not
    GSO); an int applies to every row (any IPv4/IPv6 TCP payload above it is cut).
    ``nic``: a name from ``NIC_MODELS`` or a ``NicModel``.
    ``tx_csum``: sw-gso only; True leaves segments CHECKSUM_PARTIAL with the
    pseudo-header sum, False writes full checksums (csum NONE).
    """
    model = nic_model(nic)
    override = 0 if gso_size is None else check_gso_size(gso_size)
    params = model.params()
    c = trace.columns
    n_in = len(trace)
    counts = np.empty(n_in, dtype=np.int64)
    total = segment_count_kernel(c["payload_len"], c["gso_size"], override, c["ip_version"], c["ip_hlen"],
                                 c["tcp_hlen"], c["drop"], model.code, params, counts)
    opt = np.zeros(n_in, dtype=np.int64)
    tcp_options_sum_kernel(c["tcp_hlen"], c["opt_mss"], c["opt_sackok"], c["opt_ts"], c["tsval"], c["tsecr"],
                           c["opt_wscale"], c["sack_n"], c["sack"], opt)
    ip_base = np.empty(n_in, dtype=np.int64)
    tcp_base = np.empty(n_in, dtype=np.int64)
    pseudo_base = np.empty(n_in, dtype=np.int64)
    segment_base_sums_kernel(c["ip_version"], c["ip_hlen"], c["tos"], c["df"], c["frag"], c["ttl"], c["src_ip"],
                             c["dst_ip"], c["src_ip6"], c["dst_ip6"], c["sport"], c["dport"], c["ack"], c["window"],
                             c["urg_ptr"], opt, ip_base, tcp_base, pseudo_base)
    out = {name: np.empty(total, dtype=FIELDS[name][0]) for name in _OUT}
    src_row = np.empty(total, dtype=np.int64)
    segment_fill_kernel(counts, c["payload_len"], c["gso_size"], override, c["ip_version"], c["drop"],
                        model.code, params, bool(tx_csum), c["seq"], c["flags"], c["ip_id"], c["ip_len"],
                        c["ip_csum"], c["tcp_csum"], c["csum_state"], c["gso_segs"], c["gso_type"],
                        c["ip_hlen"], c["tcp_hlen"], c["hbh_jumbo"], ip_base, tcp_base, pseudo_base,
                        src_row, out["seq"], out["payload_len"], out["flags"], out["ip_id"], out["ip_len"],
                        out["ip_csum"], out["tcp_csum"], out["csum_state"], out["gso_size"], out["gso_segs"],
                        out["gso_type"], out["drop"], out["ip_hlen"], out["hbh_jumbo"])
    g = np.full(n_in, override, dtype=np.int64) if override else c["gso_size"].astype(np.int64)
    processed = ((c["drop"] == 0) & np.isin(c["ip_version"], (4, 6)) & (g > 0) & (c["payload_len"] > g)
                 & (model.code != NIC_DROP_GSO))
    # the columns the kernel does not write are repeated from the input when first read
    lazy = {name: (repeat_rows, col, counts, total) for name, col in c.items() if name not in out}
    lazy["csum_bad"] = (_csum_bad_after, c["csum_bad"], processed, counts, total)
    return Trace(LazyColumns(out, lazy), trace.points, dict(trace.meta))


def _csum_bad_after(csum_bad, processed, counts, total):
    """csum_bad of the output rows: segments of a processed super-packet carry recomputed, right checksums."""
    return repeat_rows(csum_bad & ~processed, counts, total)


def warmup() -> None:
    """Compile the kernels on a two-row trace for every NIC model."""
    t = Trace.from_columns(payload_len=[2880, 100], gso_size=[1440, 0], tcp_hlen=[32, 32], opt_ts=[True, True],
                           ip_len=[2932, 152], flags=[ACK | PSH, ACK], seq=[1, 2881])
    for name in NIC_MODELS:
        segment(t, nic=name)
    segment(t, gso_size=1000, tx_csum=False)
    segment_counts(t)
    segment_ip_id(1, 1, 0, NIC_SW_GSO)
    segment_flags(0x18, 0, 2, 0, NIC_SW_GSO)
    segment_payload(2880, 1440, 1, 2)
