"""Slot layouts of the loop's arrays: every column name generated from one tuple of names.

Each table is a tuple of field names; ``_slots`` gives field ``x`` of table ``T``
the global ``T_X`` (its offset, counting the widths of wide fields such as the
four RNG words or the eight SACK edges) and ``T_LEN`` (or the table's own length
name) after the last one. numba sees plain int globals. Add a field by adding a
name: nothing is counted by hand.
"""
from __future__ import annotations

import numpy as np


def _slots(prefix: str, fields: tuple[str, ...], widths: dict[str, int] | None = None, start: int = 0,
           length: str = "LEN") -> dict[str, int]:
    """``{PREFIX_FIELD: offset}`` for ``fields`` in order, plus ``PREFIX_<length>`` (one past the last slot)."""
    out, at = {}, start
    for name in fields:
        out[f"{prefix}_{name.upper()}"] = at
        at += (widths or {}).get(name, 1)
    out[f"{prefix}_{length}"] = at
    return out


# parameter vector P (filled by offloadkit.sim.pack)
P_FIELDS = ("flows", "total", "end_ns", "mss", "thl", "ts", "sack", "cc", "iw", "min_rto", "max_rto", "tlp",
            "delack", "delack_ns", "quick", "rwnd", "tso", "gso", "nic", "nic_rate", "gso_max_size",
            "gso_max_segs", "gro", "budget", "napi_delay", "gro_max", "rec_limit", "sample_ns", "ucap", "ocap",
            "rev_delay", "psh_gso", "nhops", "npoints", "pkcap", "akcap", "hcap", "rxcap", "qcap", "base_rtt",
            "max_events", "seed", "rtx_tso", "reo_timer", "prr_una", "rack_time", "fack", "ofo_quick", "mtu_probing",
            "base_mss", "tso_defer",
            "loss_timers", "rto_timer")
# hop table HP columns
HP_FIELDS = ("rate", "delay", "mtu", "over", "qpkts", "qbytes", "icmp", "encap", "labels", "whole")
# global counters G (hn: events pending, hrows: rows of the heap array in use; pk_fresh / ak_fresh: pool
# indices below it were never taken, world._pop_free); rows recorded per capture point follow at G_RECN
G_FIELDS = ("hn", "seqno", "ftop", "atop", "rxh", "rxt", "napi", "nic_busy", "events", "smpn", "smp_int",
            "done_flows", "overflow", "deliv", "last_done", "retx_units", "retx_pkts", "tlps", "rtos", "recov",
            "sent_pkts", "sent_bytes", "wire_pkts", "wire_bytes", "acks", "nic_drop_pkts", "nic_drop_bytes",
            "rx_pkts", "rx_bytes", "gro_pkts", "now", "icmps", "rectot", "nheld", "hrows", "pk_fresh", "ak_fresh", "rng")
# per-flow state F (int64)
F_FIELDS = ("snd_una", "snd_nxt", "total", "una_u", "nxt_u", "mss", "cwnd", "cwnd_cnt", "ssthresh", "srtt",
            "rttvar", "min_rtt", "rto", "backoff", "state", "high_seq", "sacked", "lost", "retrans", "prr_deliv",
            "prr_out", "recover_fs", "dupacks", "tlp_high", "tkind", "tat", "tevt", "ipid", "rtx_hint",
            "rto_streak", "rack_x", "maxout", "maxout_seq", "done_ns", "rcv_nxt", "rcv_wup", "quick", "dack_at",
            "dack_evt", "ts_recent", "rcv_mss", "on", "ostamp", "h_cnt", "h_seq", "h_end", "h_first", "h_flags",
            "h_ipid", "h_ts", "retx_units", "delivered", "high_sack_u", "mark_ptr", "rack_ptr", "high_lost_u",
            "h_age", "rack_u", "rack_rtt", "reo_evt", "hs_end", "hs_curr", "hs_cnt", "hs_found", "rack_adv",
            "h_listed", "mtup_on", "search_lo", "search_hi", "probe_mtu", "probe_s", "probe_e", "pmss", "rtx_stamp",
            "wstamp", "tlp_retrans")
# per-flow parameters FP (flows may differ: size, start, RTT, congestion control)
FP_FIELDS = ("total", "start_ns", "extra_rtt", "cc")
# per-flow floats FF (CUBIC)
FF_FIELDS = ("wmax", "epoch", "k", "origin", "west")
# packet pool PK and ACK pool AK columns (an ACK carries up to 4 SACK blocks: 8 edges)
# skb_segs / skb_len: on the first segment of a super-packet, its segment count and payload (0 on the others)
# ev_key / ev_next: the packet's pending hop event, queued behind the heap (world.heap_push)
PK_FIELDS = ("flow", "seq", "len", "flags", "ts", "ipid", "retx", "iplen", "skb_segs", "skb_len", "ev_key", "ev_next")
AK_FIELDS = ("flow", "ack", "tsecr", "n", "s0")
# recorded rows REC
R_FIELDS = ("time", "point", "dir", "flow", "seq", "ack", "len", "flags", "gso_size", "gso_segs", "ipid", "tsval",
            "tsecr", "drop", "gro", "iplen", "retx", "sackn", "sack0")
# hop statistics HS, then the hop queue's state HQ in the same rows
HS_FIELDS = ("in_pkts", "in_bytes", "out_pkts", "out_bytes", "drop_pkts", "drop_bytes")
HQ_FIELDS = ("head", "n", "bytes", "busy", "follow", "fdrop")
# event kinds
EV_FIELDS = ("start", "hop", "poll", "ack", "timer", "delack", "icmp", "sample", "reo")

globals().update(_slots("P", P_FIELDS))
globals().update(_slots("HP", HP_FIELDS))
globals().update(_slots("G", G_FIELDS, {"rng": 4}))
globals().update(_slots("F", F_FIELDS))
globals().update(_slots("FF", FF_FIELDS))
globals().update(_slots("FP", FP_FIELDS))
globals().update(_slots("PK", PK_FIELDS, length="LEN_COLS"))
globals().update(_slots("AK", AK_FIELDS, {"s0": 8}, length="LEN_COLS"))
globals().update(_slots("R", R_FIELDS, {"sack0": 8}, length="COLS"))
globals().update(_slots("HS", HS_FIELDS))
globals().update(_slots("HQ", HQ_FIELDS, start=len(HS_FIELDS), length="END"))
globals().update(_slots("EV", EV_FIELDS, length="KINDS"))
HS_COLS = HQ_END                 # noqa: F821  (generated above)
G_RECN = G_LEN                   # noqa: F821  rows recorded per capture point follow
MAX_POINTS = 40

CC_NEWRENO, CC_CUBIC = 0, 1
GRO_MODE_OFF, GRO_MODE_GRO, GRO_MODE_LRO = 0, 1, 2
ST_OPEN, ST_RECOVERY, ST_LOSS = 0, 1, 2
TK_NONE, TK_RTO, TK_TLP = 0, 1, 2
# unit flags
UF_SACKED, UF_LOST, UF_RETRANS, UF_EVER, UF_HEAD = 1, 2, 4, 8, 16

N_DROP_CODES = 16
SMP_CAP = 2048
MAX_TCP_HEADER_1 = 321          # MAX_TCP_HEADER + 1 (sk_setup_caps)
INF = np.int64(1) << np.int64(62)
RACK_REO_WND_4X_NS = 1_000_000   # Linux 4.4-4.9 tcp_rack_mark_lost: reo_wnd = 1000 us (no reordering seen)
HEAP_SHIFT = 20                  # event times < 2**43 ns (2.4 hours)
HEAP_SEQ_MASK = (1 << 20) - 1

__all__ = [n for n in globals() if n.isupper() and not n.startswith("_")]
