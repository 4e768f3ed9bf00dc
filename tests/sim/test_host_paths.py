"""CPU model: host profiles, stage charging, arrival traces, paths, monotonicity, report mechanisms."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from offloadkit import codes
from offloadkit.engine import checksum as csum
from offloadkit.engine import cpu
from offloadkit.sim import host_paths as P, hosts

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the reference package
from reference import cpu_ref  # noqa: E402

SEED004 = {"gro_off_ct0": 940, "gro_off_ct1": 666, "gro_on_ct0": 575, "gro_on_ct1": 579}


@pytest.fixture(scope="module")
def router_trace():
    return cpu.arrival_trace(1e9, 1448, 1, packets=6000, vlan=True)


@pytest.fixture(scope="module")
def router_cells(router_trace):
    return {f"gro_{'on' if g else 'off'}_ct{int(c)}": P.router_forward(router_trace, gro=g, nf_conntrack_checksum=c)
            for g in (False, True) for c in (False, True)}


# ------------------------------------------------------------------ host profiles
def test_required_hosts_exist_and_load():
    names = hosts.list_hosts()
    for name in ("bcm4708-router", "x86-2009-myri10ge", "x86-2016-vm-host", "x86-2016-veth"):
        assert name in names
        h = hosts.load_host(name)
        assert h.clock_hz > 0 and h.link_bps > 0 and h.csum_ns_per_byte > 0 and h.stages


@pytest.mark.parametrize("name", hosts.list_hosts())
def test_every_constant_has_source_and_estimates_have_derivation(name):
    raw = json.loads((hosts.hosts_dir() / f"{name}.json").read_text())
    consts = [v for v in raw.values() if isinstance(v, dict) and "value" in v]
    consts += list(raw.get("memory", {}).values())
    consts += [c for s in raw["stages"].values() for c in s["costs"]]
    assert consts
    for c in consts:
        assert c["source"].strip(), c
        assert c["status"] in ("published", "estimated"), c
        if c["status"] == "estimated":
            assert c.get("derivation", "").strip(), c
    table = hosts.load_host(name).constants_table()
    assert table["source"].map(bool).all()


def test_unknown_host_and_parameter_are_actionable():
    with pytest.raises(ValueError, match="available"):
        hosts.load_host("no-such-host")
    h = hosts.load_host("x86-2009-myri10ge")
    with pytest.raises(ValueError, match="cache_bytes"):
        h.with_(cache_size=1)
    assert h.with_(cache_bytes=1e6).memory["cache_bytes"] == 1e6
    with pytest.raises(ValueError, match="no stage"):
        h.scale_stage("nope", 2)


# ------------------------------------------------------------------ charging
def test_charge_multiplies_each_cost_by_its_unit_count():
    h = hosts.load_host("bcm4708-router")
    rec = cpu.charge(h, "driver_tx", packets_in=10, packets_out=10, bytes_in=14480,
                     counts={"csum_help": 3}, csum_bytes=4440)
    spec = {c.symbol: c for c in h.stages["driver_tx"].costs}
    assert rec.ns["bgmac_start_xmit"] == pytest.approx(10 * spec["bgmac_start_xmit"].value)
    assert rec.ns["skb_checksum_help"] == pytest.approx(3 * spec["skb_checksum_help"].value)
    assert rec.ns["csum_partial"] == pytest.approx(4440 * h.csum_ns_per_byte)
    assert rec.total_ns == pytest.approx(sum(rec.ns.values()))


def test_charge_refuses_a_cost_unit_the_path_did_not_count():
    h = hosts.load_host("bcm4708-router")
    with pytest.raises(ValueError, match="csum_help"):
        cpu.charge(h, "driver_tx", packets_in=1, packets_out=1, bytes_in=1)


def test_no_checksum_cost_without_recorded_passes():
    h = hosts.load_host("bcm4708-router")
    for stage in h.stages:
        assert all(c.symbol != cpu.CSUM_SYMBOL for c in h.stages[stage].costs)


# ------------------------------------------------------------------ arrivals
def test_arrival_trace_rate_trains_and_sequence():
    t = cpu.arrival_trace(1e9, 1448, 3, packets=60, train_pkts=4)
    assert len(t) == 60
    assert list(t.flow[:12]) == [0] * 4 + [1] * 4 + [2] * 4
    gap = np.diff(t.time_ns)
    assert gap.min() >= 12303 and gap.max() <= 12305        # 1538 B at 1 Gb/s
    for f in range(3):
        s = t.seq[t.flow == f].astype(np.int64)
        assert np.all(np.diff(s) == 1448)
    assert np.all(t.ip_len == 20 + 32 + 1448) and np.all(t.wire_len == 1514)
    p, w = cpu.trace_bytes(t)
    assert p == 60 * 1448 and w == 60 * 1538


def test_arrival_trace_interleave_and_encapsulation():
    t = cpu.arrival_trace(10e9, 1398, 4, packets=16, train_pkts=2, interleave=2, vxlan=True, outer_udp_csum=0)
    assert list(t.flow[:8]) == [0, 1, 0, 1, 2, 3, 2, 3]
    assert np.all(t.l2_bytes == 64) and np.all(t.vni == 99) and np.all(t.outer_udp_csum == 0)
    assert np.all(t.wire_len == 1514)


def test_autosize_train():
    assert cpu.autosize_train(10e9, 1448, 1000) == 2            # 10 Mb/s per flow: min_tso_segs
    assert cpu.autosize_train(10e9, 1448, 100) == 8
    assert cpu.autosize_train(10e9, 1448, 1) == 45              # capped by 64 KB


@pytest.mark.parametrize("kw,msg", [(dict(mss=0, packets=1), "MSS"), (dict(rate_bps=0, packets=1), "rate"),
                                    (dict(), "packets= or duration_ns"), (dict(duration_ns=1), "empty")])
def test_arrival_trace_errors(kw, msg):
    args = dict(rate_bps=1e9, mss=1448)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        cpu.arrival_trace(**args)


# ------------------------------------------------------------------ kernels vs reference
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 70000)), min_size=0, max_size=40),
       st.sampled_from([4096, 65536]), st.sampled_from([1448, 65215]))
def test_splice_calls_matches_reference(rows, pipe, goal):
    flows = np.array([r[0] for r in rows], np.int32)
    pay = np.array([r[1] for r in rows], np.int32)
    assert tuple(cpu.splice_calls(flows, pay, pipe, goal)) == cpu_ref.splice_calls_ref(
        list(flows), list(pay), pipe, goal)


def test_miss_fraction():
    assert cpu.miss_fraction(10, 8e6, 1e4) == 0
    assert cpu.miss_fraction(1600, 8e6, 1e4) == pytest.approx(0.5)


# ------------------------------------------------------------------ router (004)
def test_router_conservation_and_packet_counts(router_cells, router_trace):
    for r in router_cells.values():
        assert cpu.conserved(r)
        assert r.stages[0].packets_in == len(router_trace)
        assert r.stages[-1].packets_out == len(router_trace)     # GSO gives back every wire segment
    off, on = router_cells["gro_off_ct1"], router_cells["gro_on_ct1"]
    assert off.stages[1].packets_out == len(router_trace)         # GRO off: every packet goes up alone
    assert on.stages[1].packets_out < len(router_trace) / 10       # GRO on: merged
    ip_on = next(s for s in on.stages if s.name == "ip")
    assert ip_on.packets_in == on.stages[1].packets_out


def test_router_checksum_passes_are_the_recorded_ones(router_trace):
    from offloadkit.engine import gro
    h = hosts.load_host("bcm4708-router")
    for g in (False, True):
        for ct in (False, True):
            r = P.router_forward(router_trace, gro=g, nf_conntrack_checksum=ct)
            res = gro.gro(router_trace, gro.GroParams(enabled=g, rx_csum="none"))
            skbs, ctp = csum.conntrack_check(res.out, enabled=ct)
            segs = P.sw_segment(skbs, tx_csum=True) if g else skbs
            helped = csum.tx_checksum(segs, device_can_csum=False)
            recorded = res.passes.total_bytes() + ctp.total_bytes() + helped.total_bytes()
            charged = sum(s.ns.get("csum_partial", 0.0) for s in r.stages)
            assert charged == pytest.approx(recorded * h.csum_ns_per_byte)
            if not g:
                assert res.passes.total_bytes() == 0 and helped.total_bytes() == 0
                assert (ctp.total_bytes() > 0) == ct
            else:
                assert ctp.total_bytes() == 0          # GRO validated: conntrack trusts it
                assert res.passes.total_bytes() > 0 and helped.total_bytes() > 0


def test_router_matches_per_packet_reference(router_trace):
    from offloadkit.engine import gro
    h = hosts.load_host("bcm4708-router")
    for g, ct in ((False, True), (True, False)):
        r = P.router_forward(router_trace, gro=g, nf_conntrack_checksum=ct)
        res = gro.gro(router_trace, gro.GroParams(enabled=g, rx_csum="none"))
        skbs = res.out
        segs = P.sw_segment(skbs, tx_csum=True) if g else skbs
        rows = lambda t: [dict(payload_len=int(t.payload_len[i]), tcp_hlen=int(t.tcp_hlen[i]),
                               csum_state=int(t.csum_state[i]), gso_size=int(t.gso_size[i])) for i in range(len(t))]
        ref = cpu_ref.router_forward_ref(h, [int(x) for x in router_trace.payload_len], rows(skbs), rows(segs),
                                         gro=g, nf_conntrack_checksum=ct,
                                         gro_pass_bytes=res.passes.total_bytes())
        for s in r.stages:
            for sym, ns in ref[s.name].items():
                assert s.ns.get(sym, 0.0) == pytest.approx(ns, rel=1e-9), (s.name, sym)
            assert set(k for k, v in s.ns.items() if v) <= set(ref[s.name])


def test_report_004_mechanism_order_and_csum_share(router_cells):
    mbps = {k: r.rate_bps / 1e6 for k, r in router_cells.items()}
    # 940 > 666 > 579 ~ 575: GRO off/ct0 > GRO off/ct1 > GRO on (either)
    assert mbps["gro_off_ct0"] > mbps["gro_off_ct1"] > max(mbps["gro_on_ct0"], mbps["gro_on_ct1"])
    assert abs(mbps["gro_on_ct0"] - mbps["gro_on_ct1"]) / mbps["gro_on_ct1"] < 0.02
    assert router_cells["gro_off_ct0"].bottleneck == "link"
    for k, v in SEED004.items():                          # near the seed's numbers (tuned in issue 6)
        assert abs(mbps[k] - v) / v < 0.10, (k, mbps[k], v)
    off = router_cells["gro_off_ct1"].share("csum_partial")
    on = router_cells["gro_on_ct1"].share("csum_partial")
    assert 1.5 < on / off < 2.5                            # 13.14 % -> 25.46 %: roughly doubles
    assert 0.08 < off < 0.20 and 0.18 < on < 0.35
    assert router_cells["gro_off_ct0"].share("csum_partial") == 0


def test_router_tso_and_tx_csum_remove_passes(router_trace):
    base = P.router_forward(router_trace, gro=True)
    hw = P.router_forward(router_trace, gro=True, tx_csum_hw=True)
    tso = P.router_forward(router_trace, gro=True, tso=True, tx_csum_hw=True)
    assert hw.rate_bps > base.rate_bps
    assert tso.rate_bps >= hw.rate_bps
    assert tso.stages[-1].packets_in == tso.stages[1].packets_out     # no software GSO
    nofeat = P.router_forward(router_trace, gro=True, tx_csum_feature=False)
    gso = next(s for s in nofeat.stages if s.name == "sw_gso")
    assert gso.csum_bytes > 0                                          # gso_make_checksum per segment
    assert nofeat.stages[-1].csum_bytes == 0                           # segments leave complete


# ------------------------------------------------------------------ monotonicity
@settings(max_examples=15, deadline=None)
@given(st.floats(0.05, 8.0), st.floats(0.0, 4.0), st.booleans())
def test_more_checksum_cost_never_faster(c1, extra, gro_on):
    t = cpu.arrival_trace(1e9, 1448, 2, packets=600, vlan=True)
    h = hosts.load_host("bcm4708-router")
    a = P.router_forward(t, h.with_(csum_ns_per_byte=c1), gro=gro_on)
    b = P.router_forward(t, h.with_(csum_ns_per_byte=c1 + extra), gro=gro_on)
    assert b.rate_bps <= a.rate_bps * (1 + 1e-12)


@settings(max_examples=10, deadline=None)
@given(st.booleans(), st.integers(1, 4))
def test_more_checksum_passes_never_faster(gro_on, flows):
    t = cpu.arrival_trace(1e9, 1448, flows, packets=600, vlan=True)
    ct0 = P.router_forward(t, gro=gro_on, nf_conntrack_checksum=False, tx_csum_hw=True)
    ct1 = P.router_forward(t, gro=gro_on, nf_conntrack_checksum=True, tx_csum_hw=True)
    sw_tx = P.router_forward(t, gro=gro_on, nf_conntrack_checksum=True, tx_csum_hw=False)
    passes = [sum(s.csum_bytes for s in r.stages) for r in (ct0, ct1, sw_tx)]
    assert passes[0] <= passes[1] <= passes[2]
    assert ct0.rate_bps >= ct1.rate_bps >= sw_tx.rate_bps


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["driver_rx", "gro", "ip", "conntrack", "nat", "egress", "driver_tx"]),
       st.floats(1.0, 5.0), st.sampled_from(["router", "local"]))
def test_higher_per_packet_cost_never_makes_gro_less_useful(stage, factor, path):
    if path == "router":
        t = cpu.arrival_trace(1e9, 1448, 2, packets=800, vlan=True)
        h = hosts.load_host("bcm4708-router")
        run = lambda host, g: P.router_forward(t, host, gro=g)
    else:
        stage = {"conntrack": "tcp", "nat": "socket_copy", "egress": "ip", "driver_tx": "tcp"}.get(stage, stage)
        t = cpu.arrival_trace(20e9, 1448, 2, packets=800, csum_state=codes.CSUM_UNNECESSARY)
        h = hosts.load_host("x86-2016-veth")
        run = lambda host, g: P.local_receive(t, host, gro=g)
    saving = lambda host: run(host, False).ns_per_byte() - run(host, True).ns_per_byte()
    hi = h.scale_stage(stage, factor, per="packet")
    assert saving(hi) >= saving(h) - 1e-9


@settings(max_examples=8, deadline=None)
@given(st.floats(1e6, 3e7), st.floats(1.0, 4.0))
def test_larger_cache_never_moves_the_splice_cliff_to_fewer_sessions(cache, grow):
    h = hosts.load_host("x86-2009-myri10ge")
    small = P.splice_cliff(h.with_(cache_bytes=cache), hi=20000, packets=1200)
    large = P.splice_cliff(h.with_(cache_bytes=cache * grow), hi=20000, packets=1200)
    assert large >= small


def test_splice_cliff_moves_with_cache_and_footprint():
    h = hosts.load_host("x86-2009-myri10ge")
    base = P.splice_cliff(h, hi=20000, packets=1200)
    assert 700 <= base <= 1000                                    # "below 800-1000 concurrent sessions"
    assert P.splice_cliff(h.with_(cache_bytes=2 * h.memory["cache_bytes"]), hi=20000, packets=1200) > 1.6 * base
    fp = h.memory["session_footprint_bytes"]
    assert P.splice_cliff(h.with_(session_footprint_bytes=2 * fp), hi=20000, packets=1200) < 0.7 * base


# ------------------------------------------------------------------ splice proxy (003)
def test_report_003_mechanism():
    df = P.splice_sweep([10, 100, 500, 1000, 1500, 2000], packets=6000)
    few = df[df.sessions <= 500]
    assert (few.wire_rate_bps > 9.9e9).all()                     # line rate ("10 Gbps")
    cpu500 = float(df.loc[df.sessions == 500, "cpu"].iloc[0])
    assert 0.5 <= cpu500 <= 0.7                                   # "about 60% CPU"
    many = df[df.sessions >= 1000]
    assert (many.bottleneck == "cpu").all()
    w1000 = float(df.loc[df.sessions == 1000, "wire_rate_bps"].iloc[0])
    assert abs(w1000 - 6.7e9) / 6.7e9 < 0.10                      # "about 6.7 Gbps"
    assert np.all(np.diff(df.segments_per_skb) <= 1e-9)           # more sessions: smaller aggregates
    assert np.all(np.diff(df.rate_bps) <= 1e-3)


def test_splice_more_sessions_raise_allocation_cost():
    h = hosts.load_host("x86-2009-myri10ge")
    per_byte = []
    for s in (50, 400, 1200, 3000):
        t = cpu.arrival_trace(10e9, 1448, s, packets=3000)
        r = P.splice_proxy(t, h, sessions=s)
        alloc = next(x for x in r.stages if x.name == "alloc")
        per_byte.append(alloc.total_ns / r.payload_bytes)
        assert cpu.conserved(r)
    assert all(b > a for a, b in zip(per_byte, per_byte[1:]))


def test_splice_profile_shifts_to_allocation_above_the_cliff():
    below = P.splice_proxy(cpu.arrival_trace(10e9, 1448, 600, packets=4000))
    above = P.splice_proxy(cpu.arrival_trace(10e9, 1448, 1200, packets=4000))
    top_below = below.profile().query("symbol != '[idle/other]'").symbol.iloc[0]
    assert top_below == "tcp_sendpage"                            # seed 003 line 48
    alloc = ["__alloc_skb", "sk_stream_alloc_skb", "__slab_alloc", "kmem_cache_alloc", "__kmalloc_track_caller"]
    sb = sum(below.share(s) for s in alloc)
    sa = sum(above.share(s) for s in alloc)
    assert sa > 2 * sb
    assert above.share("__slab_alloc") > 0 and below.share("__slab_alloc") == 0


# ------------------------------------------------------------------ VM receive (002)
def test_report_002_mechanism():
    t = cpu.arrival_trace(10e9, 1398, 1, packets=4000, vxlan=True, outer_udp_csum=0)
    agg = P.vm_receive(t, rx_csum="unnecessary")                  # bnx2x-like: inner checksum vouched
    noagg = P.vm_receive(t, rx_csum="unnecessary-outer-only")     # mlx4-like
    assert cpu.conserved(agg) and cpu.conserved(noagg)
    assert noagg.info["mean_tap_payload"] == 1398                 # "they're all 1398 in length"
    assert agg.info["mean_tap_payload"] > 10000                   # "five digit range"
    assert noagg.rate_bps < agg.rate_bps
    assert noagg.bottleneck == "vhost"
    rate = noagg.rate_bps
    assert noagg.utilisation(rate)["vhost"] > 2 * agg.utilisation(rate)["vhost"]
    assert abs(noagg.rate_bps - 6.65e9) / 6.65e9 < 0.10
    assert abs(agg.rate_bps - 8.65e9) / 8.65e9 < 0.10
    guest = noagg.stages[-1]
    assert guest.csum_bytes > 0 and agg.stages[-1].csum_bytes == 0   # the guest validates NONE inner packets


def test_vm_receive_requires_vxlan():
    with pytest.raises(ValueError, match="vxlan=True"):
        P.vm_receive(cpu.arrival_trace(1e9, 1448, packets=10))


# ------------------------------------------------------------------ local receive (001 host)
def test_local_receive_gro_off_changes_what_later_stages_see():
    t = cpu.arrival_trace(40e9, 1448, 1, packets=3000, csum_state=codes.CSUM_UNNECESSARY)
    on, off = P.local_receive(t, gro=True), P.local_receive(t, gro=False)
    for r in (on, off):
        assert cpu.conserved(r)
    assert off.stages[2].packets_in == len(t) > 10 * on.stages[2].packets_in
    assert off.ns_per_byte() > on.ns_per_byte()
    assert on.rate_bps > off.rate_bps
    assert abs(on.rate_bps - 30e9) / 30e9 < 0.15                  # ~30000 Mb/s single stream (seed 001)
    none = P.local_receive(t, gro=False, rx_csum="none")
    assert none.stages[3].csum_bytes > 0 and off.stages[3].csum_bytes == 0


# ------------------------------------------------------------------ result object
def test_result_tables_and_rates(router_cells):
    r = router_cells["gro_on_ct1"]
    prof = r.to_pandas("profile")
    assert {"symbol", "stage", "context", "cycles_per_s", "share"} <= set(prof.columns)
    assert prof.share.sum() == pytest.approx(1.0)
    assert prof.cycles_per_s.is_monotonic_decreasing
    stages = r.to_pandas("stages")
    assert list(stages.stage) == [s.name for s in r.stages]
    cyc = r.cycles_per_s()
    assert sum(cyc.values()) == pytest.approx(r.host.clock_hz * r.utilisation()["softirq"])
    assert r.rate_bps == pytest.approx(min(r.offered_bps, r.link_goodput_bps, *r.capacity_bps.values()))
    assert r.cpu_limited_bps <= r.link_goodput_bps
    half = r.utilisation(r.rate_bps / 2)["softirq"]
    assert half == pytest.approx(r.utilisation()["softirq"] / 2)
    assert math.isclose(r.profile(context="softirq", cpus=1).share.sum(), 1.0)
    with pytest.raises(ValueError, match="stages"):
        r.to_pandas("nope")
    assert "router_forward" in repr(r) and r.summary()["bottleneck"] == "softirq"


def test_empty_trace_is_refused():
    t = cpu.arrival_trace(1e9, 1448, packets=5)[np.zeros(5, bool)]
    with pytest.raises(ValueError, match="empty"):
        P.router_forward(t)


def test_warmup_runs():
    cpu.warmup()


def test_gro_off_shortcut_equals_the_engine():
    from offloadkit.engine import gro
    t = cpu.arrival_trace(1e9, 1448, 3, packets=200, vxlan=True, outer_udp_csum=0)
    for mode in ("none", "unnecessary", "unnecessary-outer-only", "complete"):
        fast, passes = P.run_gro(t, enabled=False, rx_csum=mode)
        res = gro.gro(t, gro.GroParams(enabled=False, rx_csum=mode))
        assert len(passes) == 0 and res.passes.total_bytes() == 0
        for col in ("payload_len", "csum_state", "csum_level", "gso_segs", "gso_size", "flow", "seq"):
            assert np.array_equal(getattr(fast, col), getattr(res.out, col)), (mode, col)


def test_splice_lro_table_size_and_interleave_shape_aggregates():
    t = cpu.arrival_trace(10e9, 1448, 500, packets=6400)
    small = P.splice_proxy(t, lro_descriptors=8)
    big = P.splice_proxy(t, lro_descriptors=64)
    assert big.info["segments_per_skb"] > 1.5 * small.info["segments_per_skb"]
    assert big.ns_per_byte() < small.ns_per_byte()
    assert cpu.conserved(small) and cpu.conserved(big)
    off = P.splice_proxy(t, aggregation="off")
    assert off.info["segments_per_skb"] == 1 and off.ns_per_byte() > small.ns_per_byte()
    mixed = P.splice_proxy(cpu.arrival_trace(10e9, 1448, 50, packets=6400, interleave=16))
    alone = P.splice_proxy(cpu.arrival_trace(10e9, 1448, 50, packets=6400, interleave=1))
    assert mixed.info["segments_per_skb"] < alone.info["segments_per_skb"]
    with pytest.raises(ValueError, match="aggregation"):
        P.splice_proxy(t, aggregation="tso")


def test_compare_profile_normalises_over_measured_symbols(router_cells):
    r = router_cells["gro_off_ct1"]
    measured = {"csum_partial": 13.14, "v7_dma_inv_range": 10.16, "no_such_symbol": 1.0}   # seed 004 lines 43-44
    df = r.compare_profile(measured)
    assert df.measured_share.sum() == pytest.approx(1.0) and df.model_share.sum() == pytest.approx(1.0)
    assert float(df.loc[df.symbol == "no_such_symbol", "model_share"].iloc[0]) == 0
    assert list(df.model_rank[:2]) == [1, 2]              # csum_partial first, as perf shows
    with pytest.raises(ValueError, match="measured"):
        r.compare_profile({})


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(1, 3), st.booleans(), st.booleans(),
       st.sampled_from(["router", "vm", "local", "splice"]))
def test_every_path_conserves_packets(flows, train, interleave, knob_a, knob_b, path):
    mss = 1398 if path == "vm" else 1448
    t = cpu.arrival_trace(1e9, mss, flows, packets=500, train_pkts=train, interleave=interleave,
                          vxlan=path == "vm", vlan=path == "router", outer_udp_csum=0)
    if path == "router":
        r = P.router_forward(t, gro=knob_a, nf_conntrack_checksum=knob_b, tso=not knob_b and knob_a)
    elif path == "vm":
        r = P.vm_receive(t, gro=knob_a, rx_csum="unnecessary" if knob_b else "unnecessary-outer-only")
    elif path == "local":
        r = P.local_receive(t, gro=knob_a, rx_csum="none" if knob_b else "unnecessary")
    else:
        r = P.splice_proxy(t, aggregation="lro" if knob_a else "off", sessions=flows * 50)
    assert cpu.conserved(r)
    assert r.stages[0].packets_in == len(t)
    assert all(s.bytes_in == int(t.payload_len.sum()) for s in r.stages)      # bytes conserved too
    assert 0 < r.rate_bps <= r.link_goodput_bps * (1 + 1e-9)
    assert all(v >= 0 for s in r.stages for v in s.ns.values())


def test_paths_return_the_packets_their_stages_saw():
    """router_forward and vm_receive carry their capture points' traces: nothing re-runs GRO to draw them."""
    lan = cpu.arrival_trace(1e9, 1448, 1, packets=400, vlan=True)
    r = P.router_forward(lan, "bcm4708-router", gro=True, rx_csum="none")
    skbs, _ = P.run_gro(lan, enabled=True, rx_csum="none")
    assert set(r.traces) == {"lan", "forward", "wan"} and r.traces["lan"] is lan
    assert np.array_equal(r.traces["forward"].payload_len, skbs.payload_len) and len(skbs) < len(lan)
    assert int(r.traces["wan"].payload_len.sum()) == int(lan.payload_len.sum())
    assert r.traces["wan"].payload_len.max() <= 1448 and (r.traces["wan"].csum_state == codes.CSUM_NONE).all()
    vx = cpu.arrival_trace(10e9, 1398, 1, packets=400, vxlan=True, outer_udp_csum=0)
    v = P.vm_receive(vx, gro=True, rx_csum="unnecessary")
    assert set(v.traces) == {"nic", "tap"} and not csum.is_vxlan(v.traces["tap"]).any()
    assert int(v.traces["tap"].payload_len.sum()) == int(vx.payload_len.sum())


def test_a_host_file_edited_is_read_again(tmp_path):
    import json

    from offloadkit.sim import hosts
    src = hosts.hosts_dir() / "x86-2016-veth.json"
    path = tmp_path / "mine.json"
    d = json.loads(src.read_text())
    path.write_text(json.dumps(d))
    before = hosts.load_host(path).clock_hz
    d["clock_hz"]["value"] = before * 2
    path.write_text(json.dumps(d, indent=1))              # another size: a new version of the file
    assert hosts.load_host(path).clock_hz == before * 2
