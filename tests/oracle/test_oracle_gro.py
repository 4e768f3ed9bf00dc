"""Oracle: ``offloadkit gro`` over the committed router-egress captures against the
kernel's receiver capture (GRO on).

NAPI poll ends are invisible in a capture, and "the kernel just flushes more
often" does not hold aggregate by aggregate (an aggregate that starts earlier
reaches 64 KB earlier). So the kernel's poll ends are read off its aggregates
(ended without PSH although the next segment fitted) and handed to the kit as
time gaps; then the kit must give the kernel's aggregates exactly: the same
boundaries, no merge across a PSH, the same headers (IP length, ID, flags, TTL,
window). See ``offloadkit.lab.oracle``.

Issue 3's literal check (the kit's boundaries are a subset of the kernel's, no
merge across a PSH) runs with what is known of the capturing kernel: HZ 250
(budget-exhausted polls flush everything) and polls that end when the veth ring
runs empty between bursts (a gap of two capture ticks). It holds, exactly, on
every capture but ``nots-mss1000`` (xfail, strict: see its reason).

With the CLI's defaults (HZ 1000, 1 ms gap, 64-packet polls counted across
bursts) the subset check holds on 6 of the 7 GRO captures, but not as evidence:
at HZ 1000 a budget end flushes only packets from an earlier jiffy, so inside a
sub-millisecond burst the kit simply does not flush where the HZ-250 kernel did
(the kernel then shows extra boundaries, tolerated by the check); on
``ts-mtu1492-pmtud`` a budget end falls after a 1 ms tick and the kit splits an
aggregate the kernel kept. With ``--hz 250`` and the 1 ms gap, 6 of 7 fail
(polls counted across bursts split aggregates). So with defaults only the PSH
half is asserted.
"""
from __future__ import annotations

import functools
import struct
from pathlib import Path

import dpkt
import pytest
from kit_cli import run_verb

from offloadkit.codes import PSH
from offloadkit.lab import oracle
from offloadkit.lab.grid import load_case
from offloadkit.lab.packets import read_headers

CAPS = Path(__file__).resolve().parents[2] / "offloadkit" / "data" / "captures"
CASES = sorted(p.parent.name for p in CAPS.glob("*/settings.json"))
GRO_CASES = [n for n in CASES if load_case(CAPS / n)["settings"]["gro"]]
NO_GRO_CASES = [n for n in CASES if not load_case(CAPS / n)["settings"]["gro"]]


def _case(name: str) -> dict:
    return load_case(CAPS / name)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("oracle-gro"))


# Poll ends are invisible in a capture: read them off the kernel's aggregates (those that
# ended without PSH although the next segment fitted) and hand them to the kit as 1 s gaps.
WITH_KERNEL_POLLS = oracle.KERNEL_POLLS_GRO_ARGS


@functools.lru_cache(maxsize=None)
def _kit_gro(name: str, out_dir: str, *extra: str, polls: bool = False) -> str:
    c = _case(name)
    starts = oracle.kernel_poll_ends(c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"]) if polls else None
    arrived = oracle.arrivals(c["paths"]["router-out"], Path(out_dir) / f"{name}-arrivals{int(polls)}.pcap",
                              c["receiver_ip"], starts)
    out = str(Path(out_dir) / f"{name}-gro{int(polls)}{''.join(extra)}.pcap")
    code, err = run_verb(["gro", arrived, out, *extra])
    assert code == 0, f"offloadkit gro failed: {err}"
    return out


@pytest.mark.parametrize("name", GRO_CASES)
def test_kit_gro_equals_kernel_given_its_poll_ends(name, out_dir):
    c = _case(name)
    rep = oracle.compare_gro(_kit_gro(name, out_dir, *WITH_KERNEL_POLLS, polls=True), c["paths"]["rcv"],
                             c["paths"]["router-out"], c["sender_ip"])
    assert rep.exact, rep.summary()
    assert rep.kit_aggregates < len(read_headers(c["paths"]["router-out"], "x", c["sender_ip"])[0]), \
        "the kit aggregated nothing"


def test_oracle_catches_extra_flushes(out_dir):
    """The comparison can fail with the real verb: 8-packet polls split the kernel's aggregates."""
    name = GRO_CASES[0]
    c = _case(name)
    rep = oracle.compare_gro(_kit_gro(name, out_dir, "--napi-budget", "8", "--poll-gap", "1ms", polls=True),
                             c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert not rep.ok and rep.kit_only_boundaries > 0, rep.summary()


MSS1000_REPOLL = pytest.mark.xfail(strict=True, reason=(
    "deferred repoll, invisible in a capture: bursts of 65 segments; the kernel's first poll takes 64 "
    "(budget used up, HZ 250: all flushed, a 64000-byte aggregate) and leaves the PSH segment in the ring; "
    "net_rx_action queues the NAPI behind the NAPIs scheduled meanwhile (the receiver's ACK travelling to the "
    "sender, whose next 65-segment burst is forwarded into the ring first), so the next poll takes the leftover "
    "plus 63 segments of the next burst (the rcv capture delivers the leftover 78 us after it arrived, after "
    "that burst; the ACK at router-out acks only the 64000 bytes). The kit ends the poll at the 40 us gap "
    "after the leftover and cuts the next burst after 64 segments instead of 63"))


def _issue3_case(name):
    return pytest.param(name, marks=MSS1000_REPOLL) if name == "nots-mss1000" else name


@pytest.mark.parametrize("name", [_issue3_case(n) for n in GRO_CASES])
def test_issue3_kit_boundaries_are_kernel_boundaries(name, out_dir):
    """Issue 3, literally: only aggregate boundaries the kernel also has, never a merge across a PSH;
    with the capturing kernel's HZ and polls that end when the ring runs empty between bursts."""
    c = _case(name)
    gap = f"{oracle.burst_poll_gap_ns(c['paths']['router-out'])}ns"
    rep = oracle.compare_gro(_kit_gro(name, out_dir, "--hz", str(oracle.LAB_HZ), "--poll-gap", gap),
                             c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.ok, rep.summary()
    assert rep.coinciding > rep.kit_aggregates // 2, rep.summary()


@pytest.mark.parametrize("name", GRO_CASES)
def test_kit_gro_default_polls_never_merge_across_psh(name, out_dir):
    """With the CLI's defaults: the PSH half of issue 3's check (see the module docstring for the rest)."""
    c = _case(name)
    rep = oracle.compare_gro(_kit_gro(name, out_dir), c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.kit_aggregates > 0 and rep.psh_crossings == 0, rep.summary()


def test_budget_end_flush_depends_on_hz(out_dir):
    """The same capture and polls, HZ 250 vs 1000: at 1000 a budget end inside a burst keeps this
    jiffy's packets held, so the kit makes fewer aggregates (and the oracle can tell them apart)."""
    name = GRO_CASES[0]
    c = _case(name)
    kit = {hz: oracle.compare_gro(_kit_gro(name, out_dir, "--hz", hz, "--napi-budget", "16"), c["paths"]["rcv"],
                                  c["paths"]["router-out"], c["sender_ip"]) for hz in ("250", "1000")}
    assert kit["1000"].kit_aggregates < kit["250"].kit_aggregates
    assert not kit["250"].ok


@pytest.mark.parametrize("name", GRO_CASES)
def test_kernel_capture_is_a_sound_reference(name):
    """Kernel facts the comparison rests on: GRO really aggregated, never across a PSH."""
    c = _case(name)
    rep = oracle.compare_gro(c["paths"]["rcv"], c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.ok and rep.kernel_psh_crossings == 0, rep.summary()
    assert max(rep.kernel_sizes) > 2 * c["expected_gso_size"], "the receiver did not aggregate"


@pytest.mark.parametrize("name", NO_GRO_CASES)
def test_gro_off_receiver_sees_the_wire(name):
    c = _case(name)
    eg = read_headers(c["paths"]["router-out"], "x", c["sender_ip"])[0]
    rc = read_headers(c["paths"]["rcv"], "x", c["sender_ip"])[0]
    d = lambda t: sorted(zip(t.seq[t.direction == 0].tolist(), t.payload_len[t.direction == 0].tolist()))  # noqa: E731
    assert d(eg) == d(rc)


# -- the comparison itself must be able to fail ---------------------------------
def _records(path):
    with open(path, "rb") as f:
        return list(dpkt.pcap.Reader(f))


def _write(path, records):
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=262144)
        for ts, buf in records:
            w.writepkt(buf, ts)


def _fields(buf):
    ihl = (buf[14] & 0x0F) * 4
    ip_len = struct.unpack("!H", buf[16:18])[0]
    tcp = 14 + ihl
    seq = struct.unpack("!I", buf[tcp + 4:tcp + 8])[0]
    thlen = (buf[tcp + 12] >> 4) * 4
    return ihl, ip_len, tcp, seq, ip_len - ihl - thlen, buf[tcp + 13]


def _patch(buf, ip_len=None, seq=None, flags=None):
    b = bytearray(buf)
    _, _, tcp, _, _, _ = _fields(buf)
    if ip_len is not None:
        b[16:18] = struct.pack("!H", ip_len)
    if seq is not None:
        b[tcp + 4:tcp + 8] = struct.pack("!I", seq & 0xFFFFFFFF)
    if flags is not None:
        b[tcp + 13] = flags
    return bytes(b)


def _data_index(c, recs):
    t = read_headers(c["paths"]["rcv"], "x", c["sender_ip"])[0]
    return [int(t.frame[i]) for i in range(len(t)) if t.direction[i] == 0 and t.payload_len[i] > 0]


def test_oracle_catches_a_split_the_kernel_did_not_make(tmp_path):
    c = _case(GRO_CASES[0])
    recs = _records(c["paths"]["rcv"])
    idx = next(i for i in _data_index(c, recs) if _fields(recs[i][1])[4] > 2 * c["expected_gso_size"])
    ts, buf = recs[idx]
    _, ip_len, _, seq, pay, flags = _fields(buf)
    k = c["expected_gso_size"] + 1  # not a segment boundary
    recs[idx:idx + 1] = [(ts, _patch(buf, ip_len=ip_len - (pay - k), flags=flags & ~PSH)),
                         (ts, _patch(buf, ip_len=ip_len - k, seq=seq + k))]
    fake = tmp_path / "split.pcap"
    _write(fake, recs)
    rep = oracle.compare_gro(fake, c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert not rep.ok and rep.kit_only_boundaries >= 2


def test_oracle_catches_a_merge_across_psh(tmp_path):
    c = _case(GRO_CASES[0])
    recs = _records(c["paths"]["rcv"])
    data = _data_index(c, recs)
    for a, b in zip(data, data[1:]):
        fa, fb = _fields(recs[a][1]), _fields(recs[b][1])
        if fa[5] & PSH and (fa[3] + fa[4]) & 0xFFFFFFFF == fb[3] and fa[1] + fb[4] <= 65535:
            break
    else:
        pytest.fail("no two contiguous aggregates with a PSH in the capture")
    recs[a] = (recs[a][0], _patch(recs[a][1], ip_len=fa[1] + fb[4], flags=fa[5] | fb[5]))
    del recs[b]
    fake = tmp_path / "merged.pcap"
    _write(fake, recs)
    rep = oracle.compare_gro(fake, c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert not rep.ok and rep.psh_crossings >= 1


def _with_ip_id(buf, ip_id):
    b = bytearray(buf)
    b[18:20] = struct.pack("!H", ip_id & 0xFFFF)
    return bytes(b)


def test_oracle_leaves_out_bytes_sent_twice(tmp_path):
    """A retransmission: egress carries a segment twice and kit and kernel each hold a second
    aggregate over it, with other IP IDs. Seq alone cannot pair the copies, so aggregates over
    or next to those bytes are counted, not compared; the rest is still compared."""
    c = _case(GRO_CASES[0])
    rcv, eg = _records(c["paths"]["rcv"]), _records(c["paths"]["router-out"])
    data = _data_index(c, rcv)
    ts, buf = rcv[data[len(data) // 2]]
    seq = _fields(buf)[3]
    j = next(k for k, (_, b) in enumerate(eg) if len(b) > 54 and b[12:14] == b"\x08\x00" and b[23] == 6
             and _fields(b)[3] == seq and _fields(b)[4] > 0)
    late = max(t for t, _ in rcv + eg) + 1.0
    paths = {}
    for name, records, copy in (("egress", eg, eg[j][1]), ("kit", rcv, _with_ip_id(buf, 1)),
                                ("kernel", rcv, _with_ip_id(buf, 2))):
        paths[name] = tmp_path / f"{name}.pcap"
        _write(paths[name], records + [(late, copy)])
    rep = oracle.compare_gro(paths["kit"], paths["kernel"], paths["egress"], c["sender_ip"])
    assert rep.exact, rep.summary()
    assert rep.retransmitted >= 4 and rep.coinciding >= len(data) - 6, rep.summary()
