"""The TCP flow simulation: invariants, textbook behaviour, reports 000 and 001."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloadkit import codes
from offloadkit.engine.tcp.jiffies import RTO_TIMER_EXACT, RTO_TIMER_WHEEL, tcp_rack_reo_expiry
from offloadkit.sim.scenario import Hop, Nic, Receiver, Scenario, Tcp
from offloadkit.sim.simulate import simulate
from reference.tcp_ref import simulate_ref

BIG = 50_000     # trace_limit large enough to keep every packet of the small runs


def _offsets(result, point, flow):
    """(start, end) byte offsets of the delivered data rows of ``flow`` at ``point``."""
    t = result.at(point)
    keep = (t.direction == 0) & (t.flow == flow) & (t.drop == codes.DROP_NONE) & (t.payload_len > 0)
    t = t[keep]
    ref = result.at(result.points[0])
    ref = ref[(ref.direction == 0) & (ref.flow == flow)]
    isn = (int(ref.seq.min()) if len(ref) else 0)  # the first byte is the lowest seq (no wrap in small runs)
    start = (t.seq.astype(np.int64) - isn) % 2**32
    return start, start + t.payload_len


def check_invariants(sc: Scenario, r):
    assert not r.warnings, r.warnings
    # every byte of every flow arrives in order, exactly once as far as the sockets are concerned
    assert (r.completion_ns >= 0).all()
    assert (r.flow_delivered_bytes == sc.bytes_per_flow).all()
    assert r.delivered_bytes == sc.flows * sc.bytes_per_flow
    for f in range(sc.flows):
        # the sender never sends past the end; the receiver saw every byte of [0, total)
        s, e = _offsets(r, sc.sender_point, f)
        assert e.max() <= sc.bytes_per_flow
        s, e = _offsets(r, sc.receiver_point, f)
        order = np.argsort(s, kind="stable")
        covered = 0
        for a, b in zip(s[order], e[order]):
            assert a <= covered, f"flow {f}: bytes {covered}..{a} never reached the receiver"
            covered = max(covered, int(b))
        assert covered == sc.bytes_per_flow
    # bytes are conserved at every stage: sent = delivered + dropped (nothing left in flight)
    assert r.sent_bytes == r.wire_bytes + r.nic_dropped_bytes
    prev = r.wire_bytes
    for h in r.hops:
        assert h.in_bytes == prev
        assert h.in_bytes == h.out_bytes + h.dropped_bytes
        assert h.in_transit_bytes == 0
        prev = h.out_bytes
    assert sum(r.drop_bytes.values()) == r.nic_dropped_bytes + sum(h.dropped_bytes for h in r.hops)
    assert r.goodput_bps <= sc.bottleneck_bps


@st.composite
def scenarios(draw):
    rate = draw(st.sampled_from([2_000_000, 10_000_000, 100_000_000, 1_000_000_000]))
    delay = draw(st.sampled_from([20_000, 500_000, 5_000_000, 20_000_000]))
    loss = draw(st.sampled_from([0.0, 0.0, 0.002, 0.02]))
    nic_model = draw(st.sampled_from(["hw-tso", "hw-tso", "sw-gso", "rtl8139-legacy", "rtl8139-fixed", "drop-gso"]))
    offload = draw(st.sampled_from([(True, True), (False, True), (False, False)]))
    ts = draw(st.booleans())
    sack = draw(st.booleans())
    mtu = draw(st.sampled_from([1500, 1500, 9000, 576]))
    icmp = draw(st.booleans())
    path_mtu = draw(st.sampled_from([mtu, mtu, 1492])) if icmp and nic_model != "rtl8139-legacy" else mtu
    if nic_model == "rtl8139-legacy":
        mtu = path_mtu = 1500
    flows = draw(st.integers(1, 3))
    small = nic_model in ("drop-gso",) or loss >= 0.02
    nbytes = draw(st.integers(1, 20_000 if small else 200_000))
    tcp = Tcp(timestamps=ts, sack=sack, cc=draw(st.sampled_from(["newreno", "cubic"])),
              delayed_ack=draw(st.booleans()), tso_retransmits=draw(st.booleans()),
              psh_on_gso=draw(st.booleans()), tlp=draw(st.booleans()), rack_reo_timer=draw(st.booleans()))
    nic = Nic(model=nic_model, tso=offload[0], gso=offload[1], mtu=mtu, rate_bps=max(rate, 100_000_000))
    hops = [Hop("bottleneck", rate_bps=rate, delay_ns=delay, mtu=path_mtu, loss=loss, icmp=icmp,
                queue_packets=draw(st.sampled_from([8, 100, 1000])))]
    if draw(st.booleans()):
        encap = draw(st.sampled_from([(), ("vlan",)]))
        hops.insert(0, Hop("access", rate_bps=rate * 10, delay_ns=delay // 2, mtu=max(path_mtu, mtu) + 4 * len(encap),
                           encap=encap, queue_packets=None, queue_bytes=10**6))
    rx = Receiver(gro=draw(st.booleans()), lro=draw(st.booleans()), napi_budget=draw(st.sampled_from([1, 8, 64])),
                  napi_delay_ns=draw(st.sampled_from([0, 20_000, 200_000])))
    return Scenario(tcp=tcp, nic=nic, path=tuple(hops), receiver=rx, flows=flows, bytes_per_flow=nbytes,
                    seed=draw(st.integers(0, 2**31)), trace_limit=BIG)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_scenarios_deliver_every_byte_once_and_conserve_bytes(sc):
    r = simulate(sc)
    check_invariants(sc, r)
    again = simulate(sc)
    assert again.summary() == r.summary()
    for name, col in r.trace.columns.items():
        assert np.array_equal(col, again.trace.columns[name]), name


def test_compiled_loop_matches_the_plain_python_reference():
    sc = Scenario(path=(Hop(rate_bps=20_000_000, delay_ns=5_000_000, loss=0.01, queue_packets=30),),
                  nic=Nic(model="rtl8139-legacy"), tcp=Tcp(mss_clamp=1452), flows=2, bytes_per_flow=150_000,
                  trace_limit=BIG, seed=7)
    a, b = simulate(sc), simulate_ref(sc)
    assert a.summary() == b.summary()
    assert a.events == b.events > 1000
    for name, col in a.trace.columns.items():
        assert np.array_equal(col, b.trace.columns[name]), name


def test_different_seeds_lose_different_packets():
    sc = Scenario.simple(rate_bps=50_000_000, rtt_ns=10_000_000, loss=0.01, bytes_per_flow=500_000)
    a, b = simulate(sc), simulate(sc.replace(seed=2))
    assert a.drops != b.drops or a.duration_ns != b.duration_ns


@pytest.mark.parametrize("sc", [
    Scenario.simple(rate_bps=10_000_000_000, rtt_ns=200_000, bytes_per_flow=5_000_000, trace_limit=BIG),
    Scenario.simple(rate_bps=1_000_000_000, rtt_ns=2_000_000, loss=0.002, bytes_per_flow=3_000_000, flows=3,
                    trace_limit=BIG),
    Scenario(nic=Nic(model="drop-gso", mtu=1496), tcp=Tcp(tso_retransmits=False), duration_ns=100_000_000,
             path=(Hop("veth", rate_bps=30_000_000_000, delay_ns=25_000),), trace_limit=BIG),
    Scenario.simple(rate_bps=10_000_000_000, rtt_ns=200_000, bytes_per_flow=3_000_000, flows=2,
                    trace_limit=BIG).replace(receiver=Receiver(napi_budget=8, napi_delay_ns=300_000)),
    Scenario.simple(rate_bps=10_000_000_000, rtt_ns=200_000, loss=0.001, bytes_per_flow=150_000, flows=64,
                    trace_limit=BIG),
], ids=["10G", "1G-loss-3flows", "drop-gso", "budget-8", "64-flows"])
def test_loop_gro_model_matches_the_kernel_exact_gro(sc):
    """The ACKs are clocked by the loop's GRO (engine.gro_rules, the poll flushing only the flows it holds);
    the receiver trace comes from the batch GRO (engine.gro) over the same arrivals: same packets."""
    r = simulate(sc)
    exact = r.at(sc.receiver_point)
    exact = exact[exact.direction == 0]
    loop = r.loop_receiver
    key = lambda t: sorted(zip(t.time_ns.tolist(), t.flow.tolist(), t.seq.tolist(), t.payload_len.tolist()))
    assert len(exact) > 20 and key(exact) == key(loop)
    assert (exact.gso_segs > 1).any() == (sc.bottleneck_bps >= 10**9)


def test_gro_off_and_lro_at_the_receiver():
    base = Scenario.simple(rate_bps=10_000_000_000, rtt_ns=200_000, bytes_per_flow=2_000_000, trace_limit=BIG)
    off = simulate(base.replace(receiver=Receiver(gro=False)))
    assert set(off.segment_sizes("receiver")) <= {1448, 2_000_000 % 1448}
    lro = simulate(base.replace(receiver=Receiver(gro=False, lro=True)))
    assert max(lro.segment_sizes("receiver")) > 10 * 1448
    assert off.acks > lro.acks


# -- textbook behaviour ---------------------------------------------------------

def test_without_loss_goodput_approaches_the_bottleneck():
    sc = Scenario.simple(rate_bps=100_000_000, rtt_ns=10_000_000, duration_ns=5_000_000_000,
                         queue_packets=200, trace_limit=0)
    r = simulate(sc)
    payload_share = 1448 / (1448 + 52 + 14)
    assert r.goodput_bps <= sc.bottleneck_bps * payload_share
    assert r.goodput_bps >= 0.85 * sc.bottleneck_bps * payload_share
    # after slow start (a few RTTs) the delivery rate is at the bottleneck
    t, d = r.series_time_ns, r.series_delivered_bytes
    late = (t >= 50 * sc.base_rtt_ns)
    rate = (d[late][-1] - d[late][0]) * 8e9 / (t[late][-1] - t[late][0])
    assert rate >= 0.9 * sc.bottleneck_bps * payload_share


@pytest.mark.parametrize("cc", ["newreno", "cubic"])
def test_goodput_falls_as_one_over_sqrt_loss(cc):
    def goodput(loss):
        vals = []
        for seed in (1, 2):
            sc = Scenario.simple(rate_bps=1_000_000_000, rtt_ns=20_000_000, loss=loss, cc=cc, seed=seed,
                                 duration_ns=20_000_000_000, queue_packets=2000, trace_limit=0)
            r = simulate(sc)
            assert r.goodput_bps < sc.bottleneck_bps
            vals.append(r.goodput_bps)
        return np.mean(vals)
    low, high = goodput(0.0005), goodput(0.005)
    # Mathis et al.: rate ~ MSS / (RTT sqrt(p)) -> sqrt(10) = 3.16 for a 10x loss ratio
    assert 1.8 < low / high < 5.5, low / high
    if cc == "newreno":
        mathis = 1448 * 8 / 0.020 * np.sqrt(1.5 / 0.005)
        assert 0.6 < high / mathis < 1.6, high / mathis


def test_goodput_never_exceeds_a_slow_bottleneck_behind_a_fast_hop():
    sc = Scenario(path=(Hop("lan", rate_bps=1_000_000_000, delay_ns=100_000),
                        Hop("wan", rate_bps=20_000_000, delay_ns=5_000_000, queue_packets=50)),
                  duration_ns=3_000_000_000, trace_limit=0)
    r = simulate(sc)
    assert 0.5 * 20e6 < r.goodput_bps <= 20e6
    assert r.drops.get(codes.DROP_NAMES[codes.DROP_QUEUE_FULL], 0) > 0


def test_tso_autosizing_follows_the_pacing_rate():
    # a short RTT gets 64 KB super-packets (min-RTT bonus); 29 ms at a low rate gets 2 segments
    fast = simulate(Scenario(path=(Hop(rate_bps=10_000_000_000, delay_ns=10_000),), bytes_per_flow=3_000_000,
                             trace_limit=BIG, nic=Nic(rate_bps=10_000_000_000)))
    sizes = fast.segment_sizes("sender")
    assert max(sizes) > 30 * 1448 and max(sizes) <= 65536 - 321
    assert fast.at("sender").payload_len[0] == 5 * 1448      # IW10, tcp_cwnd_test: half the cwnd
    slow = simulate(Scenario(path=(Hop(rate_bps=9_600_000, delay_ns=14_500_000),), bytes_per_flow=100_000,
                             trace_limit=BIG))
    first = slow.at("sender")[:5]
    assert list(first.payload_len) == [2896] * 5
    # super-packets are cut into MSS segments on the wire; GRO at a fast receiver merges them again
    assert set(fast.segment_sizes("wire")) <= {1448, *[n % 1448 for n in sizes]}
    assert max(fast.segment_sizes("receiver")) > 10 * 1448


def test_pmtu_discovery_with_icmp_lowers_the_mss():
    sc = Scenario(path=(Hop("tunnel", rate_bps=50_000_000, delay_ns=5_000_000, mtu=1400, icmp=True),),
                  bytes_per_flow=300_000, trace_limit=BIG)
    r = simulate(sc)
    check_invariants(sc, r)
    assert r.drops[codes.DROP_NAMES[codes.DROP_MTU_ICMP]] > 0
    assert r.icmp_messages > 0
    late = r.at("wire")[-50:]
    assert late.payload_len.max() <= 1400 - 52


def test_silent_black_hole_stalls_and_icmp_does_not():
    base = dict(bytes_per_flow=100_000, duration_ns=5_000_000_000, trace_limit=0)
    hole = simulate(Scenario(path=(Hop(mtu=1400),), **base))
    assert hole.delivered_bytes < 2 * 1448
    assert hole.drops[codes.DROP_NAMES[codes.DROP_MTU_SILENT]] > 0
    ok = simulate(Scenario(path=(Hop(mtu=1400, icmp=True),), **base))
    assert ok.delivered_bytes == 100_000


def test_duration_runs_account_for_bytes_still_in_flight():
    sc = Scenario.simple(rate_bps=100_000_000, rtt_ns=40_000_000, loss=0.001, duration_ns=1_000_000_000,
                         trace_limit=0)
    r = simulate(sc)
    assert r.duration_ns == 1_000_000_000
    prev = r.wire_bytes
    for h in r.hops:
        assert h.in_bytes == prev == h.out_bytes + h.dropped_bytes + h.in_transit_bytes
        prev = h.out_bytes
    assert any(h.in_transit_bytes > 0 for h in r.hops)
    assert len(r.series_time_ns) > 100 and (np.diff(r.series_delivered_bytes) >= 0).all()
    assert r.series_cwnd.shape == r.series_ssthresh.shape == (1, len(r.series_time_ns))


# -- single rules, checked from the traces ------------------------------------------------

MS = 1_000_000


def test_initial_window_is_ten_segments():
    r = simulate(Scenario(path=(Hop(rate_bps=100_000_000, delay_ns=10 * MS),), bytes_per_flow=100_000,
                          trace_limit=BIG))
    sender = r.at("sender")
    first_ack = sender.time_ns[sender.direction == 1].min()
    wire = r.at("wire")
    assert (wire.time_ns < first_ack).sum() == 10


def test_delayed_ack_waits_for_a_second_segment_or_the_timer():
    lone = simulate(Scenario(tcp=Tcp(quickacks=0), path=(Hop(delay_ns=5 * MS),), bytes_per_flow=1000,
                             trace_limit=BIG)).at("receiver")
    assert list(lone.time_ns[lone.direction == 1] - lone.time_ns[lone.direction == 0][0]) == [40 * MS]
    bulk = simulate(Scenario(tcp=Tcp(quickacks=0), receiver=Receiver(gro=False), bytes_per_flow=200 * 1448,
                             path=(Hop(rate_bps=10_000_000, delay_ns=5 * MS),), trace_limit=BIG))
    recv = bulk.at("receiver")
    assert not bulk.drops and (recv.direction == 0).sum() == 200 and (recv.direction == 1).sum() == 100
    quick = simulate(Scenario(receiver=Receiver(gro=False), bytes_per_flow=20 * 1448,
                              path=(Hop(rate_bps=10_000_000, delay_ns=5 * MS),), trace_limit=BIG))
    assert (quick.at("receiver").direction == 1).sum() >= 16          # quick-ACK mode at the start


@pytest.mark.parametrize("rto_timer", [RTO_TIMER_EXACT, RTO_TIMER_WHEEL])
def test_rto_backs_off_exponentially_from_min_rto(rto_timer):
    # a black hole: every full-size packet is dropped, so only the RTO retransmits (one MSS, cwnd 1)
    r = simulate(Scenario(tcp=Tcp(tlp=False, rto_timer=rto_timer), path=(Hop(mtu=1400, delay_ns=5 * MS),),
                          bytes_per_flow=2 * 1448, duration_ns=20_000 * MS, trace_limit=BIG))
    t = r.retransmissions("sender").time_ns
    rto = 10 * MS + 200 * MS                          # srtt (the handshake's 10 ms) + min RTO
    assert r.rtos == len(t) >= 6
    if rto_timer == RTO_TIMER_EXACT:
        assert t[0] == rto
        assert np.allclose(np.diff(t)[1:] / np.diff(t)[:-1], 2.0, atol=0.01)
        return
    # 210 ms is 53 ticks, and calc_index fires one tick after; each backed-off RTO fires on a tick no
    # earlier than the doubled 53 ticks and at most one granule of its wheel level later (64 ticks < 2 s)
    tick = 4 * MS
    assert t[0] == 54 * tick
    gaps = np.diff(t)
    doubled = 53 * tick * 2 ** np.arange(1, len(t))
    assert np.all(t % tick == 0) and np.all(gaps > doubled)
    assert np.all(gaps - doubled <= np.where(doubled < 504 * tick, 8, 64) * tick + tick), (gaps - doubled) / MS


@pytest.mark.parametrize("loss_timers", [0, 2])
def test_tail_loss_probe_and_rack_reordering_window(loss_timers):
    # the last segment (1312 bytes) fits a 1400-byte MTU, the full ones do not: its SACK makes RACK mark
    # the others lost after rtt + min_rtt/4, before any probe or RTO; Linux < 4.13 times it exactly,
    # 6.7+ on the next HZ=250 tick after 2 ms more (engine.tcp.jiffies)
    tcp = Tcp(loss_timers=loss_timers)
    r = simulate(Scenario(tcp=tcp, path=(Hop(mtu=1400, delay_ns=5 * MS),), bytes_per_flow=10_000, trace_limit=BIG,
                          duration_ns=1_000 * MS))
    first = r.retransmissions("sender").time_ns[0]
    sack_arrival = r.at("sender").time_ns[r.at("sender").direction == 1][0]
    # all sent at t=0: rack_rtt = arrival, reo = min_rtt/4
    assert first == tcp_rack_reo_expiry(loss_timers, sack_arrival, (10 * MS) // 4)
    assert first == (sack_arrival + (10 * MS) // 4 if loss_timers == 0 else 20 * MS)
    # every segment lost: the probe goes out 2 srtt after the flight (6.7+: ticks covering 2 srtt + 2 ms,
    # and one more), as the last MSS
    p = simulate(Scenario(tcp=tcp, path=(Hop(mtu=1400, delay_ns=5 * MS),), bytes_per_flow=6 * 1448, trace_limit=BIG,
                          duration_ns=100 * MS))
    probe = p.retransmissions("sender")
    assert p.tlp_probes == 1 and probe.time_ns[0] == (20 * MS if loss_timers == 0 else 28 * MS)
    assert int(probe.seq[0]) == (int(p.at("sender").seq[0]) + 5 * 1448) % 2**32


# -- report 000: QEMU rtl8139 cuts 2880-byte TSO packets at 1448 -------------------------------

def report000(tso: bool, nbytes=600_000):
    return Scenario(tcp=Tcp(mss_clamp=1452, psh_on_gso=False, tso_retransmits=False, rack_reo_timer=False),
                    nic=Nic(model="rtl8139-legacy", tso=tso, gso=tso, rate_bps=100_000_000),
                    path=(Hop("ppp", rate_bps=9_600_000, delay_ns=14_500_000, mtu=1500, encap=("pppoe",)),),
                    receiver=Receiver(gro=False), bytes_per_flow=nbytes, sender_point="guest",
                    wire_point="macvtap", trace_limit=BIG)


def test_report000_mechanism():
    sc = report000(tso=True)
    r = simulate(sc)
    check_invariants(sc, r)
    guest, wire, ppp = r.at("guest"), r.at("macvtap"), r.at("ppp")
    assert r.mss_bytes == 1440
    assert (guest.payload_len[:5] == 2880).all() and (guest.gso_size[:5] == 1440).all()
    assert (guest.ip_len[:5] == 2932).all()
    # the emulation cuts 1448 + 1432 instead of 1440 + 1440
    assert list(wire.payload_len[:4]) == [1448, 1432, 1448, 1432]
    assert list(wire.ip_len[:2]) == [1500, 1484]
    assert list(wire.ip_id[:2]) == [guest.ip_id[0], (int(guest.ip_id[0]) + 1) % 65536]
    # the 1500-byte packets die at the PPPoE hop, silently; the 1484-byte ones pass
    dropped = ppp[ppp.drop != 0]
    assert set(dropped.drop) == {codes.DROP_MTU_SILENT}
    assert set(dropped.ip_len) == {1500}
    assert 1432 in r.segment_sizes("ppp") and 1448 not in r.segment_sizes("ppp")
    # retransmissions go out as single 1440-byte segments (not GSO), and get through
    later = guest[5:]
    assert (later.payload_len == 1440).sum() > 10
    assert ((later.payload_len == 1440) & (later.gso_segs == 0)).sum() == (later.payload_len == 1440).sum()
    assert r.retransmits > 0 and r.segment_sizes("ppp").get(1440, 0) > 10
    rtx = r.retransmissions("guest")
    assert len(rtx) == r.retransmit_packets
    assert set(rtx.payload_len) == {1440} and (rtx.gso_segs == 0).all()
    assert len(r.retransmissions("ppp")) > 0 and (r.retransmissions("ppp").drop == 0).all()


def test_report000_tso_on_is_several_times_slower():
    on, off = simulate(report000(True)), simulate(report000(False))
    assert not off.drops and off.retransmits == 0
    assert off.goodput_bps > 0.9 * 9.6e6 * 1440 / 1514
    assert off.goodput_bps / on.goodput_bps > 5          # the report: 723 vs 70-80 KB/s (~10x)


# -- report 001: a device path that drops every GSO skb ---------------------------------------

def report001(model: str, reason="EPROTONOSUPPORT", tso_retransmits=False):
    # Linux 4.6 / 4.7 on both ends: no RACK timer, PRR's 4.3-5.11 rule, quick ACKs after out-of-order data
    return Scenario(tcp=Tcp(tso_retransmits=tso_retransmits, rack_reo_timer=False, prr_ss_una=False,
                            ofo_quickack=True),
                    nic=Nic(model=model, mtu=1496, rate_bps=30_000_000_000, drop_reason=reason),
                    path=(Hop("veth", rate_bps=30_000_000_000, delay_ns=25_000, queue_packets=1000),),
                    duration_ns=100_000_000, trace_limit=5000)


@pytest.mark.parametrize("reason, code", [("EPROTONOSUPPORT", codes.DROP_GSO_EPROTONOSUPPORT),
                                          ("EINVAL", codes.DROP_GSO_EINVAL)])
def test_report001_gso_drops_cost_three_orders_of_magnitude(reason, code):
    # (the 4.x receiver's quick ACKs after out-of-order data ack one segment at a time; the first 2-MSS
    # quota sends only GSO skbs, all dropped, and nothing reaches the receiver until the loss probe)
    healthy = simulate(report001("hw-tso"))
    broken = simulate(report001("drop-gso", reason))
    assert healthy.goodput_bps > 20e9
    assert broken.goodput_bps * 1000 <= healthy.goodput_bps
    assert broken.delivered_bytes > 0                     # single-segment sends still get through
    assert broken.drops == {codes.DROP_NAMES[code]: broken.drops[codes.DROP_NAMES[code]]}
    sender = broken.at("sender")
    assert (sender.gso_segs[sender.drop == code] > 1).all()
    assert (sender.payload_len[sender.drop == 0] <= 1444).all()
    assert set(broken.segment_sizes("veth")) == {1444}


def test_report001_modern_tso_retransmits_also_collapse():
    """Linux >= 4.7 retransmits lost runs as TSO packets: those die too; single ones get through."""
    broken = simulate(report001("drop-gso", tso_retransmits=True).replace(duration_ns=1_000_000_000))
    assert 0 < broken.delivered_bytes and broken.goodput_bps < 0.01 * 28e9
    rtx = broken.retransmissions("sender")
    assert (rtx.drop[rtx.gso_segs > 1] != 0).all() and (rtx.drop[rtx.gso_segs == 0] == 0).all()


# -- kernel-version rules of loss recovery (report 001's 4.6/4.7 sender) --------------------------

def _world(units, ucap=64, **pk):
    """A minimal World for the recovery building blocks: one flow, ``units`` = [(send_ns, flags), ...]."""
    from offloadkit.engine import tcp as K
    P = np.zeros(K.P_LEN, np.int64)
    P[K.P_UCAP] = ucap
    P[K.P_SACK] = 1
    P[K.P_RACK_TIME] = 1
    for k, v in pk.items():
        P[getattr(K, k)] = v
    F = np.zeros((1, K.F_LEN), np.int64)
    U = np.zeros((1, ucap, 5), np.int64)
    for i, (x, fl) in enumerate(units):
        U[0, i] = (i * 1000, (i + 1) * 1000, fl, x, i + 1)
        F[0, K.F_SACKED] += bool(fl & K.UF_SACKED)
        if fl & K.UF_SACKED:
            F[0, K.F_HIGH_SACK_U] = i + 1
    F[0, K.F_NXT_U] = len(units)
    F[0, K.F_SND_NXT] = 1000 * len(units)
    F[0, K.F_RTX_HINT] = F[0, K.F_RACK_U] = -1
    W = K.World(P=P, HP=None, HL=None, NP=None, FP=np.zeros((1, K.FP_LEN), np.int64),
                G=np.zeros(K.G_LEN + K.MAX_POINTS, np.int64), H=None, PK=None, FREE=None, AK=None, AFREE=None,
                F=F, FF=np.zeros((1, K.FF_LEN)), U=U, O=None, REC=None, RXQ=None, HQ=None, HS=None, DROPS=None,
                SM=None, HELD=None)
    return K, W


def _lost(K, W):
    return [u for u in range(W.F[0, K.F_NXT_U]) if W.U[0, u, 2] & K.UF_LOST]


def test_prr_slow_start_bound_only_when_the_kernel_rule_allows_it():
    """tcp_cwnd_reduction: below ssthresh, one more than delivered only with ss_ok (4.3-5.11: an ACK of
    retransmitted data and no lost retransmission), else the delivered count; nothing delivered, no change."""
    K, W = _world([(0, 2)] * 2 + [(0, 0)] * 2 + [(0, 1)])           # 2 lost, 2 out, 1 SACKed
    F = W.F
    F[0, K.F_LOST], F[0, K.F_SSTHRESH], F[0, K.F_RECOVER_FS], F[0, K.F_PRR_OUT] = 2, 5, 10, 1
    assert K.recovery.in_flight(F, 0) == 2
    got = {}
    for ss_ok in (False, True):
        F[0, K.F_PRR_DELIV], F[0, K.F_CWND] = 0, 7
        K.recovery.prr.py_func(W, 0, 1, ss_ok)
        got[ss_ok] = int(F[0, K.F_CWND])
    assert got == {False: 2 + 1, True: 2 + 2}
    F[0, K.F_CWND] = 7
    K.recovery.prr.py_func(W, 0, 0, True)
    assert F[0, K.F_CWND] == 7
    # above ssthresh: proportional to prior_cwnd (RECOVER_FS), ceil(1 * 1 / 10) - prr_out = 0
    F[0, K.F_SSTHRESH], F[0, K.F_PRR_DELIV] = 1, 0
    K.recovery.prr.py_func(W, 0, 1, True)
    assert F[0, K.F_CWND] == 2


def test_rack_before_4_10_compares_send_times_with_a_1ms_window_in_recovery_only():
    ms = 1_000_000
    units = [(0, 0), (int(1.5 * ms), 0), (int(2.5 * ms), 1)]        # the last one SACKed
    for state, expect in ((0, []), (1, [0])):
        K, W = _world(units, P_RACK_TIME=0)
        W.F[0, K.F_STATE] = state
        K.recovery.rack_update.py_func(W, 0, 2, int(2.5 * ms), 0, 10 * ms)
        K.recovery.mark_lost.py_func(W, 0, 10 * ms)
        assert _lost(K, W) == expect, state          # 2.5 - 1.5 ms is inside the window, however late now is
    # 4.10+: the same unit is lost once it has waited rack_rtt + min_rtt/4, in any state
    K, W = _world(units)
    W.F[0, K.F_MIN_RTT] = 40_000
    K.recovery.rack_update.py_func(W, 0, 2, int(2.5 * ms), 0, 10 * ms)
    K.recovery.mark_lost.py_func(W, 0, 10 * ms)
    assert _lost(K, W) == [0, 1]


def test_fack_marks_all_but_three_below_the_highest_sack():
    """tcp_update_scoreboard with FACK (Linux <= 4.14): fackets_out - reordering head units are lost;
    RFC 6675 needs three SACKed units above."""
    units = [(0, 0)] * 5 + [(0, 1)]
    K, W = _world(units, P_FACK=1)
    K.recovery.mark_lost.py_func(W, 0, 0)
    assert _lost(K, W) == [0, 1, 2]
    K, W = _world(units, P_FACK=0)
    K.recovery.mark_lost.py_func(W, 0, 0)
    assert _lost(K, W) == []


@pytest.mark.parametrize("ofo", [False, True])
def test_quick_ack_mode_reentered_on_duplicates_and_before_4_18_on_out_of_order_data(ofo):
    """tcp_data_queue: duplicate data -> tcp_enter_quickack_mode in every version; out-of-order or partial
    data too before 4.18 (a3893637e1eb). Quick ACKs refill to min(rwnd / (2 rcv_mss), 16)."""
    from offloadkit.engine import tcp as K
    from offloadkit.sim.pack import pack
    W = K.make_world(*pack(Scenario(tcp=Tcp(ofo_quickack=ofo), bytes_per_flow=100 * 1448)))
    K.loop._init(W)
    F = W.F
    m, r0 = int(F[0, K.F_RCV_MSS]), int(F[0, K.F_RCV_NXT])
    F[0, K.F_QUICK] = 0                                           # the first quick ACKs are used up

    def rcv(a, b):
        K.receiver._rcv_data(W, 0, r0 + a * m, r0 + b * m, 1, 0)
        return int(W.G[K.G_ACKS])

    assert rcv(0, 1) == 0                                         # one in-order MSS: delayed ACK
    assert rcv(2, 3) == 1                                         # out of order: immediate, every version
    assert rcv(1, 2) == 2                                         # fills the hole
    assert rcv(3, 4) == (3 if ofo else 2)                         # one MSS unacked: quick ACK only < 4.18
    assert F[0, K.F_QUICK] == (16 - 3 if ofo else 0)
    F[0, K.F_QUICK] = 0
    n = rcv(0, 1)                                                 # a duplicate: immediate, enters quick-ACK
    assert F[0, K.F_QUICK] == 15
    assert rcv(4, 5) == n + 1                                     # the next lone MSS is acked at once


# -- loss probes as 6.18 schedules and ends them (tcp_schedule_loss_probe, tcp_process_tlp_ack) -----
def _episode(K, W, high, retrans, cwnd=10):
    F = W.F
    F[0, K.F_TLP_HIGH], F[0, K.F_TLP_RETRANS], F[0, K.F_CWND], F[0, K.F_SSTHRESH] = high, retrans, cwnd, K.INF
    F[0, K.F_SND_NXT] = 9000


def test_tcp_process_tlp_ack_ends_the_episode_as_the_kernel_does():
    K, W = _world([(0, 0)] * 9)
    F = W.F
    ack = K.recovery.tcp_process_tlp_ack.py_func
    _episode(K, W, 5000, 1)
    ack(W, 0, 4000, True)                                  # below tlp_high_seq: nothing
    assert (F[0, K.F_TLP_HIGH], F[0, K.F_CWND]) == (5000, 10)
    ack(W, 0, 5000, True)                                  # exactly tlp_high_seq, una advanced: still open
    assert F[0, K.F_TLP_HIGH] == 5000
    ack(W, 0, 6000, True)                                  # past it: a loss was repaired, CWR to ssthresh
    assert F[0, K.F_TLP_HIGH] == -1 and F[0, K.F_SSTHRESH] == 5 and F[0, K.F_CWND] == 5
    assert F[0, K.F_HIGH_SEQ] == 9000
    _episode(K, W, 5000, 1)
    ack(W, 0, 5000, False)                                 # a pure duplicate: both copies arrived
    assert (F[0, K.F_TLP_HIGH], F[0, K.F_CWND]) == (-1, 10)
    _episode(K, W, 5000, 0)
    ack(W, 0, 5000, True)                                  # a probe of new data, acked: no reduction
    assert (F[0, K.F_TLP_HIGH], F[0, K.F_CWND]) == (-1, 10)


def test_no_loss_probe_in_disorder():
    """tcp_schedule_loss_probe wants Open (or CWR): a SACKed or lost segment, a retransmission out or
    an ever-retransmitted head is Disorder (tcp_try_keep_open)."""
    K, W = _world([(0, 0)] * 4)
    open_ = K.recovery.tcp_try_keep_open.py_func
    assert open_(W, 0)
    for col in (K.F_SACKED, K.F_LOST, K.F_RETRANS):
        W.F[0, col] = 1
        assert not open_(W, 0)
        W.F[0, col] = 0
    W.U[0, 0, 2] = K.UF_EVER
    assert not open_(W, 0)
    W.U[0, 0, 2] = 0
    W.F[0, K.F_STATE] = K.ST_RECOVERY
    assert not open_(W, 0)


def test_the_rack_reordering_timer_replaces_a_pending_loss_probe():
    """One retransmit timer (icsk_pending): the SACK of the last segment arms RACK's reordering timer
    over the probe armed at the send, so the repair starts at the RACK time and no probe goes out
    (every full-sized segment dies at the 1400-byte hop; the RTO takes over)."""
    r = simulate(Scenario(tcp=Tcp(loss_timers=2), path=(Hop(mtu=1400, delay_ns=5 * MS),), bytes_per_flow=10_000,
                          trace_limit=BIG, duration_ns=400 * MS))
    assert r.tlp_probes == 0 and r.rtos >= 1
    first = r.retransmissions("sender").time_ns[0]
    assert first == 20 * MS
    assert np.all(r.retransmissions("sender").time_ns[1:] > 200 * MS)
