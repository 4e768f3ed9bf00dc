"""The kernel's GRO merge rules for TCP, one small njit function each (spec §3).

Each function is named after the kernel function whose rule it carries out
(net/ipv4/tcp_offload.c, net/ipv4/af_inet.c, net/core/gro.c) and returns a
``codes.GRO_*`` name: ``GRO_MERGED`` (0) when the rule lets the packet merge,
else the reason of the aggregate boundary. The kernel ORs its flush bits
(``flush |= ...``); the kit reports the first rule that fires, in the order
written here (one test per rule). Both GROs of the kit call these functions: the batch GRO over a
trace (``engine.gro.gro_kernel``) and the TCP loop's receiver
(``engine.tcp.receiver``), so there is one GRO.
"""
from __future__ import annotations

import numpy as np
from ..packet.jit import njit

from ..codes import (CWR, FIN, GRO_ACK_DIFFERS, GRO_CHECKSUM, GRO_FIRST, GRO_FLAGS, GRO_IP_RULE, GRO_MERGED, GRO_OFF,
                     GRO_OPTIONS_DIFFER, GRO_PURE_ACK, GRO_SEQ_GAP, GRO_SIZE, PSH, RST, SYN, URG)

FLUSH_FLAGS = URG | PSH | RST | SYN | FIN
KIND_GRO, KIND_IP_LAYER, KIND_CSUM, KIND_OFF = 0, 1, 2, 3     # how a packet reaches GRO (gro_kernel's ``kind``)


@njit(cache=True, nogil=True, inline="always")
def gro_list_prepare(held_key, new_key):
    """Same flow [gro_list_prepare, tcp_gro_lookup]: addresses, ports, VLAN tag, VNI (+ outer UDP
    checksum zero/non-zero) and IPv6 extension headers agree; the caller folds them into one key."""
    return held_key == new_key


@njit(cache=True, nogil=True, inline="always")
def dev_gro_receive_kind(kind):
    """A packet that never reaches tcp_gro_receive is delivered unmerged [dev_gro_receive]: IP options,
    fragments or a bad IP header checksum at the IP layer [inet_gro_receive] (GRO_IP_RULE), a failed
    checksum or a refused VXLAN packet (GRO_CHECKSUM), or GRO off on the device (GRO_OFF)."""
    if kind == KIND_IP_LAYER:
        return GRO_IP_RULE
    if kind == KIND_CSUM:
        return GRO_CHECKSUM
    if kind == KIND_OFF:
        return GRO_OFF
    return GRO_MERGED


@njit(cache=True, nogil=True, inline="always")
def gro_start_reason(plen, flags, last_close):
    """Why a TCP segment with nothing of its flow held starts a new aggregate: a pure ACK
    (GRO_PURE_ACK), else why the flow's previous packet was delivered (``last_close``, a GRO_* code),
    or GRO_FIRST for the flow's first packet (``last_close`` < 0)."""
    if plen == 0 and (flags & FLUSH_FLAGS) == 0:
        return GRO_PURE_ACK
    return last_close if last_close >= 0 else GRO_FIRST


@njit(cache=True, nogil=True, inline="always")
def tcp_gro_flag_mask(cwr_old):
    """The flag bits tcp_gro_receive compares: all but FIN and PSH, and not CWR under the rule before
    AccECN (``cwr_old``), where a CWR segment never merges instead. A constant of the run: callers
    compute it once, outside their packet loop."""
    return 0x1FF & ~(FIN | PSH | (CWR if cwr_old else 0))


@njit(cache=True, nogil=True, inline="always")
def tcp_gro_receive_flush(mask, flags, head_flags, window, head_window, plen, seq, head_seq_end, ack,
                          head_ack, hlen, head_hlen, optk, head_optk):
    """tcp_gro_receive's header tests of a new segment against the held one (spec §3.3).

    ``mask``: ``tcp_gro_flag_mask(cwr_old)``. The flag word (window included)
    must be equal in the mask's bits; under the old CWR rule (CWR not in the
    mask) a CWR segment never merges. Then: payload present, contiguous
    sequence, equal ack, byte-identical options.
    """
    if (mask & CWR) == 0 and (flags & CWR) != 0:            # flush |= flags & CWR (the old rule)
        return GRO_FLAGS
    if ((flags ^ head_flags) & mask) != 0 or window != head_window:   # the flag word, window included
        return GRO_FLAGS
    if plen == 0:
        return GRO_PURE_ACK
    if seq != head_seq_end:                                 # th2->seq + len ^ th->seq
        return GRO_SEQ_GAP
    if ack != head_ack:                                     # th->ack_seq ^ th2->ack_seq
        return GRO_ACK_DIFFERS
    if hlen != head_hlen or optk != head_optk:              # options, byte for byte
        return GRO_OPTIONS_DIFFER
    return GRO_MERGED


@njit(cache=True, nogil=True, inline="always")
def inet_gro_flush_id(id_new, id_head, count, fixed):
    """inet_gro_flush's IP ID rule: the ID must be the head's + the segments held (incrementing), or
    equal to the head's once the aggregate has fixed IDs. True -> flush."""
    off = (np.int64(id_new) - np.int64(id_head)) & 0xFFFF
    want = 0 if fixed else (count & 0xFFFF)
    return off != want


@njit(cache=True, nogil=True, inline="always")
def inet_gro_id_fixed(id_new, id_head, count, df_new, ipid_df):
    """The second packet decides whether an aggregate has fixed IDs [inet_gro_flush]: same ID as the
    head (and DF set, under the rule before 2025, ``ipid_rule="df-fixed"``)."""
    return count == 1 and ((np.int64(id_new) - np.int64(id_head)) & 0xFFFF) == 0 and (not ipid_df or df_new)


@njit(cache=True, nogil=True, inline="always")
def inet_gro_flush(net_new, net_head, id_flush, outer_flush):
    """inet_gro_flush's network rules: equal TTL, TOS and DF (one key), the ID rule on the inner and
    the outer IPv4 header. GRO_IP_RULE or GRO_MERGED."""
    return GRO_IP_RULE if net_new != net_head or id_flush or outer_flush else GRO_MERGED


@njit(cache=True, nogil=True, inline="always")
def tcp_gro_receive_mss(plen, mss, gso_new):
    """tcp_gro_receive's size rule: payload <= the head's MSS (flush |= (len - 1) >= mss); a GSO packet
    needs the head's gso_size."""
    return GRO_SIZE if (mss != gso_new if gso_new > 0 else plen > mss) else GRO_MERGED


@njit(cache=True, nogil=True, inline="always")
def skb_gro_receive(held_len, plen, limit):
    """skb_gro_receive's size rule: the merged packet stays below ``limit`` (gro_max_size, 65536
    unless BIG TCP) -> else -E2BIG, GRO_SIZE."""
    return GRO_SIZE if held_len + plen >= limit else GRO_MERGED


@njit(cache=True, nogil=True, inline="always")
def tcp_gro_receive_close(flags, plen, mss, count, gso):
    """After a merge [tcp_gro_receive, the end]: a segment shorter than the MSS (flush = len < mss) or
    with URG/PSH/RST/SYN/FIN closes the aggregate: GRO_FLAGS, GRO_SIZE, or GRO_MERGED (stays held)."""
    if (flags & FLUSH_FLAGS) != 0:
        return GRO_FLAGS
    short = (plen != np.int64(count) * gso) if gso > 0 else (plen < mss)
    return GRO_SIZE if short else GRO_MERGED


@njit(cache=True, nogil=True, inline="always")
def tcp_gro_receive_new(flags, plen, count, gso, soft_flush):
    """A segment that did not merge is held, unless its own flush bits deliver it at once
    [tcp_gro_receive, NAPI_GRO_CB(skb)->flush]: URG/PSH/RST/SYN/FIN (GRO_FLAGS), CB.flush from the IP
    layer (GRO_IP_RULE), a pure ACK (GRO_PURE_ACK), a GSO packet of uneven segments (GRO_SIZE).
    GRO_MERGED means "held"."""
    if (flags & FLUSH_FLAGS) != 0:
        return GRO_FLAGS
    if soft_flush:
        return GRO_IP_RULE
    if plen == 0:
        return GRO_PURE_ACK
    if gso > 0 and plen != np.int64(count) * gso:
        return GRO_SIZE
    return GRO_MERGED
