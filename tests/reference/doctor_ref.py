"""Plain-Python reference for the doctor's per-flow bookkeeping: the readable oracle and the
benchmark baseline.

One packet at a time, in capture order, a dict of state per (flow, direction):
sequence numbers are unwrapped from the previous packet of the same direction; a
data packet starting below the highest byte sent before it is a retransmission,
one starting above it follows a hole. Pure ACKs (no payload, no SYN/FIN/RST)
repeating the previous pure ACK's number with the same window (or carrying SACK
blocks) are duplicate ACKs. A SACK hole is a distinct ACK number of an ACK whose
lowest SACK block starts above it.
"""
from __future__ import annotations

from offloadkit import codes

NOT_PURE = codes.SYN | codes.FIN | codes.RST


def _wrap(d: int) -> int:
    return ((d + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def flow_counts(trace) -> dict[int, dict]:
    """Per flow: retransmitted packets/bytes, holes, duplicate ACKs, SACK holes, bytes (data direction)."""
    c = {k: v.tolist() for k, v in trace.columns.items()}
    state: dict[tuple[int, int], dict] = {}
    out: dict[int, dict] = {}
    for i in range(len(trace)):
        f, d = c["flow"][i], c["direction"][i] & 1
        r = out.setdefault(f, {"retrans": 0, "retrans_bytes": 0, "holes": 0, "dup_acks": 0, "sack_holes": set(),
                               "bytes": 0})
        s = state.get((f, d))
        seq, plen, fl = c["seq"][i], c["payload_len"][i], c["flags"][i]
        if s is None:
            s = state[(f, d)] = {"seq": seq, "rel": 0, "max_end": None, "last_ack": None}
        else:
            s["rel"] += _wrap(seq - s["seq"])
            s["seq"] = seq
        end = s["rel"] + plen + (1 if fl & codes.SYN else 0) + (1 if fl & codes.FIN else 0)
        prev = s["max_end"] if s["max_end"] is not None else s["rel"]
        if plen > 0 and d == 0:
            r["bytes"] += plen
            if s["rel"] < prev:
                r["retrans"] += 1
                r["retrans_bytes"] += plen
            elif s["rel"] > prev:
                r["holes"] += 1
        s["max_end"] = max(prev, end) if s["max_end"] is not None else end
        if d == 1:
            pure = plen == 0 and fl & codes.ACK and not fl & NOT_PURE
            if pure:
                last = s["last_ack"]
                if last is not None and last[0] == c["ack"][i] and (last[1] == c["window"][i] or c["sack_n"][i] > 0):
                    r["dup_acks"] += 1
                s["last_ack"] = (c["ack"][i], c["window"][i])
            n = min(c["sack_n"][i], 4)
            dists = [_wrap(c["sack"][i][2 * k] - c["ack"][i]) for k in range(n)]
            dists = [x for x in dists if x > 0]
            if dists:
                r["sack_holes"].add(c["ack"][i])
    for r in out.values():
        r["sack_holes"] = len(r["sack_holes"])
    return out
