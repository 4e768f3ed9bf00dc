"""Plain-Python reference for the CPU model: the readable oracle and the benchmark baseline.

One packet at a time, with dicts and loops: what each stage of the router path
sees and what it costs, and how a splice proxy turns queued skbs into splice
calls and sent skbs. It shares only the host profile's numbers with
``offloadkit.engine.cpu``/``sim.host_paths`` and takes the engine's traces (GRO
output, software-GSO segments) as given.
"""
from __future__ import annotations

CSUM_NONE, CSUM_PARTIAL = 0, 3


def stage_costs(host, stage):
    """{unit: [(symbol, ns)]} of one stage of a host profile."""
    out = {}
    for c in host.stages[stage].costs:
        out.setdefault(c.per, []).append((c.symbol, c.value))
    return out


def charge_packet(costs, ns, payload, extra=None):
    """Add one packet's costs (per packet, per byte, per event in ``extra``) to ``ns``."""
    for unit, n in [("packet", 1), ("byte", payload)] + list((extra or {}).items()):
        for sym, v in costs.get(unit, []):
            ns[sym] = ns.get(sym, 0.0) + v * n


def router_forward_ref(host, wire_payloads, skbs, segs, *, gro, nf_conntrack_checksum, gro_pass_bytes,
                       tx_csum_hw=False):
    """Stage -> {symbol: ns} for the router path, charging one packet at a time.

    wire_payloads: payload of each arriving packet; skbs: list of dicts (payload_len,
    tcp_hlen, csum_state, gso_size) after GRO; segs: list of dicts after software GSO;
    gro_pass_bytes: total bytes GRO validated in software (recorded by the engine).
    """
    cs = host.csum_ns_per_byte
    res = {}
    ns = res.setdefault("driver_rx", {})
    c = stage_costs(host, "driver_rx")
    for p in wire_payloads:
        charge_packet(c, ns, p)
    ns = res.setdefault("gro", {})
    c = stage_costs(host, "gro")
    for p in wire_payloads:
        charge_packet(c, ns, p, {"gro_packet": 1 if gro else 0})
    if gro_pass_bytes:
        ns["csum_partial"] = ns.get("csum_partial", 0.0) + cs * gro_pass_bytes
    for st in ("ip", "conntrack", "nat", "egress"):
        ns = res.setdefault(st, {})
        c = stage_costs(host, st)
        for s in skbs:
            charge_packet(c, ns, s["payload_len"])
            if st == "conntrack" and nf_conntrack_checksum and s["csum_state"] == CSUM_NONE:
                ns["csum_partial"] = ns.get("csum_partial", 0.0) + cs * (s["tcp_hlen"] + s["payload_len"])
    ns = res.setdefault("sw_gso", {})
    c = stage_costs(host, "sw_gso")
    for s in skbs:
        if s["gso_size"] > 0 and s["payload_len"] > s["gso_size"]:
            nseg = -(-s["payload_len"] // s["gso_size"])
            charge_packet(c, ns, s["payload_len"], {"gso_skb": 1, "segment": nseg})
        else:
            charge_packet(c, ns, s["payload_len"], {"gso_skb": 0, "segment": 0})
    ns = res.setdefault("driver_tx", {})
    c = stage_costs(host, "driver_tx")
    for s in segs:
        helped = (not tx_csum_hw) and s["csum_state"] == CSUM_PARTIAL
        charge_packet(c, ns, s["payload_len"], {"csum_help": 1 if helped else 0})
        if helped:
            ns["csum_partial"] = ns.get("csum_partial", 0.0) + cs * (s["tcp_hlen"] + s["payload_len"])
    return res


def splice_calls_ref(flows, payloads, pipe_bytes, size_goal):
    """(calls, tx_skbs): one wake per run of one flow's skbs, a call per pipe-full,
    the call's bytes sent in skbs of at most size_goal."""
    runs = []
    for f, p in zip(flows, payloads):
        if runs and runs[-1][0] == f:
            runs[-1][1] += p
        else:
            runs.append([f, p])
    calls = skbs = 0
    for _, b in runs:
        while b > 0:
            chunk = min(b, pipe_bytes)
            calls += 1
            skbs += -(-chunk // size_goal)
            b -= chunk
    return calls, skbs


def charge_loop(host, stage, payloads, extra_per_packet=None):
    """Per-packet charging of one stage over a list of payloads (benchmark baseline)."""
    c = stage_costs(host, stage)
    ns = {}
    for p in payloads:
        charge_packet(c, ns, p, extra_per_packet)
    return ns
