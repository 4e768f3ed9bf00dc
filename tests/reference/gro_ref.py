"""Plain-Python reference for engine.gro: the readable oracle and the benchmark baseline.

Written from kernel-offload-spec §3 with Python objects (a dict per held
packet, a list per bucket, newest first as in the kernel's gro_list), one
packet at a time. It shares nothing with the numba kernel except the rx-hash
bucket of each packet (an arbitrary function), which the caller passes in.
"""
from __future__ import annotations

from offloadkit import codes

FIN, SYN, RST, PSH, URG, ACK, CWR = (codes.FIN, codes.SYN, codes.RST, codes.PSH, codes.URG, codes.ACK,
                                     codes.CWR)
FLUSH_FLAGS = URG | PSH | RST | SYN | FIN


def rx_csum_verdict(row: dict, mode: str, tunnel_rule: str = "old"):
    """(ok, refused, bytes summed, state after) for one packet reaching GRO's L4 handlers."""
    bad = row["csum_bad"]
    vxlan = row["vni"] >= 0
    outer = max(row["outer_udp_csum"], 0)
    if mode == "trace":
        state, level = row["csum_state"], row["csum_level"]
    elif mode == "none":
        state, level = codes.CSUM_NONE, 0
    elif mode == "complete":
        state, level = codes.CSUM_COMPLETE, 0
    elif mode == "unnecessary":
        state, level = (codes.CSUM_NONE, 0) if bad else (codes.CSUM_UNNECESSARY, 1 if vxlan else 0)
    else:  # unnecessary-outer-only
        state, level = (codes.CSUM_NONE, 0) if (bad and not vxlan) else (codes.CSUM_UNNECESSARY, 0)
    levels_left = level + 1 if state == codes.CSUM_UNNECESSARY else 0
    valid = state == codes.CSUM_COMPLETE
    partial = state == codes.CSUM_PARTIAL
    summed = 0
    tcp_len = row["tcp_hlen"] + row["payload_len"]

    def incr(st, lv):
        if st == codes.CSUM_NONE:
            return codes.CSUM_UNNECESSARY, 0
        if st == codes.CSUM_UNNECESSARY:
            return st, min(lv + 1, 3)
        return st, lv

    if vxlan and not partial:
        if outer != 0 and levels_left == 0 and not valid:
            summed += row["ip_len"] + 30           # outer UDP datagram: UDP + VXLAN + inner Ethernet + IP
            valid = True
        if levels_left:
            levels_left -= 1
        else:
            state, level = incr(state, level)
        if outer != 0 and levels_left == 0 and not valid:
            valid = True                           # conversion from the outer checksum
        stuck = levels_left == 0 and not valid
        if stuck and (tunnel_rule == "old" or outer != 0):
            return False, True, summed, (state, level)
    if partial:
        return True, False, summed, (state, level)
    if levels_left:
        return True, False, summed, (state, level)
    if valid and not bad:
        return True, False, summed, incr(state, level)
    summed += tcp_len
    if bad:
        return False, False, summed, (state, level)
    return True, False, summed, incr(state, level)


def ip_early_flush(row: dict) -> bool:
    """inet_gro_receive's early exits: IP options, fragment (checksum checked by the caller)."""
    return row["ip_version"] == 4 and (row["ip_hlen"] != 20 or (row["frag"] & 0x3FFF) != 0)


def flow_of(row: dict):
    if row["ip_version"] == 6:
        addrs = (bytes(row["src_ip6"]), bytes(row["dst_ip6"]))
    else:
        addrs = (row["src_ip"], row["dst_ip"])
    tup = (row["ip_version"], addrs, row["sport"], row["dport"])
    vx = row["vni"] >= 0
    return tup, (tup, row["vlan_tci"], row["vni"], vx and row["outer_udp_csum"] > 0)


def options_of(row: dict):
    sack = tuple(row["sack"][:2 * row["sack_n"]])
    return (row["tcp_hlen"], row["opt_mss"], row["opt_sackok"], row["opt_ts"],
            row["tsval"] if row["opt_ts"] else 0, row["tsecr"] if row["opt_ts"] else 0,
            row["opt_wscale"], row["sack_n"], sack)


def gro_reference(rows: list[dict], buckets: list[int], *, budget=64, gap_ns=1_000_000, max_size=65536,
                  cwr_rule="old", ipid_rule="current", rx_csum="unnecessary", tunnel_rule="old",
                  max_held=8, n_buckets=8, ip_ok=None, enabled=True, hz=1000):
    """Returns (reasons per row, outputs) with outputs = list of dicts
    {rows: [input rows], close: reason, time: ns}, in delivery order.

    Poll ends: the queue ran empty (gap) -> flush everything; the budget ran out ->
    ``gro_flush_normal(HZ >= 1000)``: with hz >= 1000 each bucket is walked oldest
    first and the walk stops at the first packet held in the current jiffy."""
    reasons = [None] * len(rows)
    outputs = []
    lists = [[] for _ in range(n_buckets)]      # newest first, like the kernel's gro_list
    last_close = {}

    def deliver(p, close, t):
        outputs.append({"rows": p["rows"], "close": close, "time": t})
        last_close[p["tup"]] = close

    def single(i, close, t, tup):
        outputs.append({"rows": [i], "close": close, "time": t})
        last_close[tup] = close

    def jiffy(t):
        return t * hz // 1_000_000_000

    def flush(t, old_only):
        now = jiffy(t)
        for lst in lists:
            while lst:
                p = lst[-1]                     # oldest first (__gro_flush_chain walks the list in reverse)
                if old_only and p["age"] == now:
                    break
                lst.pop()
                deliver(p, codes.GRO_END_OF_POLL, t)

    def poll_end(t, used, empty):
        if used:
            flush(t, hz >= 1000)                # __napi_poll: gro_flush_normal(gro, HZ >= 1000)
        if empty:
            flush(t, False)                     # napi_complete_done: everything

    in_poll = 0
    for i, row in enumerate(rows):
        if i:
            used = in_poll >= budget
            empty = gap_ns is not None and row["time_ns"] - rows[i - 1]["time_ns"] > gap_ns
            if used or empty:
                poll_end(rows[i - 1]["time_ns"], used, empty)
                in_poll = 0
        in_poll += 1
        t = row["time_ns"]
        tup, fkey = flow_of(row)
        if not enabled:
            reasons[i] = codes.GRO_OFF
            single(i, codes.GRO_OFF, t, tup)
            continue
        if ip_early_flush(row) or (ip_ok is not None and not ip_ok[i]):
            reasons[i] = codes.GRO_IP_RULE
            single(i, codes.GRO_IP_RULE, t, tup)
            continue
        soft = row["ip_version"] == 4 and (row["frag"] & 0x8000) != 0
        if not soft:
            ok, refused, _, _ = rx_csum_verdict(row, rx_csum, tunnel_rule)
            if not ok:
                reasons[i] = codes.GRO_CHECKSUM
                single(i, codes.GRO_CHECKSUM, t, tup)
                continue
        plen = row["payload_len"]
        flags = row["flags"]
        gso = row["gso_size"] if row["gso_size"] > 0 and row["gso_segs"] > 1 else 0
        count = row["gso_segs"] if gso else 1
        lst = lists[buckets[i]]
        p = next((q for q in lst if q["fkey"] == fkey), None)
        if p is not None:
            head = rows[p["rows"][0]]
            r = 0
            ignore = FIN | PSH | (CWR if cwr_rule == "old" else 0)
            if cwr_rule == "old" and flags & CWR:
                r = codes.GRO_FLAGS
            elif (flags ^ head["flags"]) & 0x1FF & ~ignore or row["window"] != head["window"]:
                r = codes.GRO_FLAGS
            elif plen == 0:
                r = codes.GRO_PURE_ACK
            elif row["seq"] != p["seq_end"]:
                r = codes.GRO_SEQ_GAP
            elif row["ack"] != head["ack"]:
                r = codes.GRO_ACK_DIFFERS
            elif options_of(row) != options_of(head):
                r = codes.GRO_OPTIONS_DIFFER
            if r != codes.GRO_PURE_ACK:
                net_bad = (row["ttl"], row["tos"]) != (head["ttl"], head["tos"])
                if row["ip_version"] == 4:
                    net_bad |= row["df"] != head["df"]
                    off = (row["ip_id"] - head["ip_id"]) & 0xFFFF
                    if p["count"] == 1 and off == 0 and (ipid_rule == "current" or row["df"]):
                        p["fixed"] = True
                    net_bad |= off != (0 if p["fixed"] else p["count"] & 0xFFFF)
                if r == 0 and net_bad:
                    r = codes.GRO_IP_RULE
            if r == 0 and ((gso and p["mss"] != gso) or (not gso and plen > p["mss"])):
                r = codes.GRO_SIZE
            if r == 0:
                limit = max_size
                if row["vni"] >= 0 and limit > 65536:
                    limit = 65536
                if p["len"] + plen >= limit:
                    r = codes.GRO_SIZE
                elif soft:
                    r = codes.GRO_IP_RULE
            if r == 0:
                reasons[i] = codes.GRO_MERGED
                p["rows"].append(i)
                p["seq_end"] = (p["seq_end"] + plen) & 0xFFFFFFFF
                p["len"] += plen
                p["count"] += count
                short = plen != count * gso if gso else plen < p["mss"]
                if flags & FLUSH_FLAGS or short:
                    lst.remove(p)
                    deliver(p, codes.GRO_FLAGS if flags & FLUSH_FLAGS else codes.GRO_SIZE, t)
                continue
            reasons[i] = r
            lst.remove(p)
            deliver(p, r, t)
        else:
            if plen == 0 and not flags & FLUSH_FLAGS:
                reasons[i] = codes.GRO_PURE_ACK
            elif soft:
                reasons[i] = codes.GRO_IP_RULE
            elif any(q["tup"] == tup for q in lst):
                reasons[i] = codes.GRO_NOT_SAME_FLOW
            else:
                reasons[i] = last_close.get(tup, codes.GRO_FIRST)
        short = plen != count * gso if gso else plen < 1
        if flags & FLUSH_FLAGS or short or soft:
            close = (codes.GRO_FLAGS if flags & FLUSH_FLAGS else codes.GRO_IP_RULE if soft
                     else codes.GRO_PURE_ACK if plen == 0 else codes.GRO_SIZE)
            single(i, close, t, tup)
            continue
        if len(lst) >= max_held:
            oldest = lst.pop()
            deliver(oldest, codes.GRO_TABLE_FULL, t)
        lst.insert(0, {"rows": [i], "fkey": fkey, "tup": tup, "seq_end": (row["seq"] + plen) & 0xFFFFFFFF,
                       "len": row["ip_len"] + max(row["l2_bytes"] - 14, 0), "count": count,
                       "mss": gso if gso else plen, "fixed": False, "age": jiffy(t)})
    if rows:
        poll_end(rows[-1]["time_ns"], in_poll >= budget, True)
    return reasons, outputs


def trace_rows(trace) -> list[dict]:
    """A Trace as a list of plain dicts (Python ints/bools/lists)."""
    cols = {k: v.tolist() for k, v in trace.columns.items()}
    return [{k: cols[k][i] for k in cols} for i in range(len(trace))]
