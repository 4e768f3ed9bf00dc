"""``offloadkit gro`` on pcaps built like the kernel's GRO selftest (tools/testing/selftests/net/gro.c):
the same packets, the same expected payload lengths per case (cases end with a FIN packet)."""
import json
import shutil
import struct
import subprocess

import numpy as np
import pytest

from offloadkit.cli import main
from offloadkit.commands.gro import parse_duration_ns
from offloadkit.io.capture import read_capture, read_records

ACK, PSH, SYN, RST, URG, FIN = 0x10, 0x08, 0x02, 0x04, 0x20, 0x01
P = 100
MSS = 4096 - 20 - 40
SRC4, DST4 = bytes([192, 168, 1, 200]), bytes([192, 168, 1, 100])
SRC6, DST6 = bytes.fromhex("fdaa" + "00" * 13 + "02"), bytes.fromhex("fdaa" + "00" * 13 + "01")


def _sum(b):
    if len(b) & 1:
        b += b"\0"
    return sum(struct.unpack(f"!{len(b) // 2}H", b))


def _fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def pkt(seq, plen=P, v=4, flags=ACK, ack=100, opts=b"", ip_opts=b"", frag=0x4000, ttl=8, tos=0, ip_id=0,
        bad=False, ext=None, fraghdr=False, ipip=False, fill=b"a"):
    payload = fill * plen
    tcp = struct.pack("!HHIIBBHHH", 1500, 8000, 100 + seq, 100 + ack, ((20 + len(opts)) // 4) << 4, flags,
                      65535, 0, 0) + opts
    seg = tcp + payload
    src, dst = (SRC4, DST4) if v == 4 else (SRC6, DST6)
    s = _sum(src) + _sum(dst) + 6 + len(seg)
    c = (~_fold(s + _sum(seg))) & 0xFFFF
    if bad:
        c = (c - 1) & 0xFFFF
    seg = seg[:16] + struct.pack("!H", c) + seg[18:]
    if v == 4:
        ihl = 20 + len(ip_opts)
        hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl // 4, tos, ihl + len(seg), ip_id, frag, ttl, 6, 0, src, dst)
        hdr += ip_opts
        hdr = hdr[:10] + struct.pack("!H", (~_fold(_sum(hdr))) & 0xFFFF) + hdr[12:]
        ip = hdr + seg
        if ipip:
            o = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(ip), ip_id, frag, ttl, 4, 0, SRC4, DST4)
            o = o[:10] + struct.pack("!H", (~_fold(_sum(o))) & 0xFFFF) + o[12:]
            ip = o + ip
        return b"\xaa\x00\x00\x00\x00\x01\xaa\x00\x00\x00\x00\x02\x08\x00" + ip
    nxt, extb = 6, b""
    if ext is not None:
        nxt, extb = 0, bytes([6, 0]) + ext
    if fraghdr:
        nxt, extb = 44, bytes([6, 0, 0, 0, 0, 0, 0, 0])
    ip = struct.pack("!IHBB", 6 << 28 | tos << 20, len(extb) + len(seg), nxt, 8) + src + dst + extb + seg
    return b"\xaa\x00\x00\x00\x00\x01\xaa\x00\x00\x00\x00\x02\x86\xdd" + ip


def fin(v=4, **kw):
    return pkt(2 * P, 0, v=v, flags=ACK | FIN, **kw)


def write_pcap(path, frames, snaplen=262144):
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    t = 0
    for f in frames:
        if f == "sleep":
            t += 1_000_000
            continue
        t += 10
        f = f.ljust(60, b"\0") if len(f) >= 14 else f          # Ethernet pads short frames
        data = f[:snaplen]
        out += struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(data), len(f))
        out += data
    path.write_bytes(bytes(out))


def read_out(path):
    data = path.read_bytes()
    assert struct.unpack_from("<I", data)[0] in (0xA1B2C3D4, 0xA1B23C4D)
    off, recs = 24, []
    while off < len(data):
        _, _, cap, orig = struct.unpack_from("<IIII", data, off)
        recs.append((orig, data[off + 16:off + 16 + cap]))
        off += 16 + cap
    return recs


def payload_groups(recs):
    """Like gro.c's check_recv_pkts: payload lengths per case, a FIN ends a case."""
    groups, cur = [], []
    for orig, d in recs:
        et = struct.unpack_from("!H", d, 12)[0]
        ip = 14
        if et == 0x0800:
            if d[ip + 9] == 4:
                ip += 20
            ihl = (d[ip] & 0xF) * 4
            tot = struct.unpack_from("!H", d, ip + 2)[0]
            tcp = ip + ihl
            seg = tot - ihl
        else:
            nxt, p = d[ip + 6], ip + 40
            while nxt in (0, 43, 60, 44):
                nxt, p = d[p], p + (8 if nxt == 44 else (d[p + 1] + 1) * 8)
            tcp = p
            seg = struct.unpack_from("!H", d, ip + 4)[0] - (p - ip - 40)
        thl = (d[tcp + 12] >> 4) * 4
        if d[tcp + 13] & FIN:
            groups.append(cur)
            cur = []
            continue
        cur.append(seg - thl)
    if cur:
        groups.append(cur)
    return groups


def run_cli(tmp_path, frames, *extra, snaplen=262144):
    inp, outp = tmp_path / "in.pcap", tmp_path / "out.pcap"
    write_pcap(inp, frames, snaplen)
    assert main(["gro", str(inp), str(outp), *extra]) == 0
    return read_out(outp)


def ts_opt(ts, order=0):
    t = struct.pack("!BBII", 8, 10, ts, 0)
    return [b"\x01\x01" + t, b"\x01" + t + b"\x01", t + b"\x01\x01"][order]


def cases(v, ipip=False):
    kw = dict(v=v, ipip=ipip)
    d = []
    d += [pkt(0, **kw), pkt(P, **kw), fin(**kw)]                              # data: same size
    d += [pkt(0, **kw), pkt(P, P // 2, **kw), fin(**kw)]                      # large then small
    d += [pkt(0, P // 2, **kw), pkt(P // 2, **kw), fin(**kw)]                 # small then large
    exp = [[2 * P], [P + P // 2], [P // 2, P]]
    d += [pkt(0, 0, **kw), pkt(0, 0, **kw), pkt(0, 0, ack=101, **kw), fin(**kw)]   # ack
    exp += [[0, 0, 0]]
    for flag, plen in ((PSH, P), (SYN, 0), (RST, 0), (URG, 0)):              # flags: extra one at position 2
        for i in range(5):
            if i == 2:
                d.append(pkt(2 * plen, plen, flags=ACK | flag, **kw))
            else:
                d.append(pkt(i * P, **kw))
        d.append(fin(**kw))
        exp.append([3 * P, 2 * P] if flag == PSH else [2 * P, 0, 2 * P])
    d += [pkt(0, **kw), pkt(P, bad=True, **kw), fin(**kw)]                     # tcp: bad checksum
    d += [pkt(0, **kw), pkt(P + 1, **kw), fin(**kw)]                           # seq
    d += [pkt(0, opts=ts_opt(0), **kw), pkt(P, opts=ts_opt(0), **kw), pkt(2 * P, opts=ts_opt(100), **kw),
          pkt(3 * P, opts=ts_opt(100, 1), **kw), pkt(4 * P, opts=ts_opt(100, 2), **kw), fin(**kw)]
    d += [pkt(0, opts=ts_opt(0), **kw), pkt(P, opts=ts_opt(0), **kw), pkt(2 * P, opts=b"\x01\x03\x03\x00", **kw),
          fin(**kw)]
    exp += [[P, P], [P, P], [2 * P, P, P, P], [2 * P, P]]
    d += [pkt(0, **kw), pkt(P, tos=2, **kw), fin(**kw)]                        # ECN
    d += [pkt(0, **kw), pkt(P, tos=1 if v == 4 else 0xF0, **kw), fin(**kw)]    # TOS / traffic class
    exp += [[P, P], [P, P]]
    if v == 4 and not ipip:
        d += ["sleep", pkt(0), pkt(P, ttl=7), fin()]
        d += ["sleep", pkt(0), pkt(P, ip_opts=b"\x44\x0c\x05\x00" + b"\0" * 8), pkt(2 * P), "sleep", fin()]
        d += ["sleep", pkt(0), pkt(P, frag=0x6000), "sleep", fin()]
        exp += [[P, P], [P, P, P], [P, P]]
        for ids, df, e in (((8, 9), 1, [2 * P]), ((8, 8), 1, [2 * P]), ((8, 9), 0, [2 * P]), ((8, 8), 0, [2 * P]),
                           ((8, 9, 9), 1, [2 * P, P]), ((8, 8, 9), 1, [2 * P, P])):
            d += ["sleep"] + [pkt(k * P, ip_id=i, frag=0x4000 * df) for k, i in enumerate(ids)] + ["sleep", fin()]
            exp.append(e)
    if v == 6:
        d += [pkt(0, v=6), pkt(P, v=6), "sleep", pkt(2 * P, v=6, fraghdr=True), pkt(3 * P, v=6), "sleep", fin(v=6)]
        d += ["sleep", pkt(0, v=6, ext=b"\0" * 6), pkt(P, v=6, ext=b"\0" * 6), "sleep", fin(v=6)]
        d += ["sleep", pkt(0, v=6, ext=b"\0" * 6), pkt(P, v=6, ext=b"\x11" * 6), "sleep", fin(v=6)]
        exp += [[2 * P, P, P], [2 * P], [P, P]]
    # large
    off = 20 if (v == 4 and not ipip) else 0
    maxp = 65535 - 20 - 40
    n = maxp // MSS
    rem = (maxp + off) % MSS
    for r in (rem, rem + 1):
        d += ["sleep"] + [pkt(i * MSS, MSS, **kw) for i in range(n)]
        d += [pkt(n * MSS, r, **kw), pkt((n + 1) * MSS, r, **kw), fin(**kw)]
    exp += [[maxp + off, rem], [maxp + off - rem, rem + 1, rem + 1]]
    return d, exp


@pytest.mark.parametrize("v,ipip", [(4, False), (6, False), (4, True)])
def test_gro_selftest_cases(tmp_path, v, ipip):
    frames, expected = cases(v, ipip)
    got = payload_groups(run_cli(tmp_path, frames))
    assert got == expected


def test_header_only_capture_works(tmp_path):
    frames = [pkt(0, 1000), pkt(1000, 1000), pkt(2000, 1000, flags=ACK | PSH)]
    recs = run_cli(tmp_path, frames, snaplen=54 + 12)
    assert len(recs) == 1
    orig, data = recs[0]
    assert orig == 14 + 40 + 3000 and len(data) == 54 + 12     # what was captured, the full original length
    assert data[54:] == b"a" * 12
    assert struct.unpack_from("!H", data, 16)[0] == 40 + 3000
    assert data[14 + 20 + 13] & PSH


def test_merged_bytes_are_kernel_shaped(tmp_path):
    recs = run_cli(tmp_path, [pkt(0, fill=b"x"), pkt(P, fill=b"y")])
    orig, data = recs[0]
    assert orig == len(data) == 14 + 40 + 2 * P
    assert data[54:] == b"x" * P + b"y" * P
    assert _fold(_sum(data[14:34])) == 0xFFFF                    # IP header checksum right
    tcp_len = 20 + 2 * P
    partial = _fold(_sum(SRC4) + _sum(DST4) + 6 + tcp_len)
    assert struct.unpack_from("!H", data, 34 + 16)[0] == partial  # CHECKSUM_PARTIAL pseudo-header sum


def test_rx_csum_none_bad_packet_delivered_unmerged(tmp_path, capsys):
    frames = [pkt(0), pkt(P, bad=True), pkt(P), pkt(2 * P)]
    recs = run_cli(tmp_path, frames, "--rx-csum", "none", "--json")
    summary = json.loads(capsys.readouterr().out)
    assert summary["reasons"]["checksum"] == 1 and summary["software_checksum_bytes"] == 4 * (20 + P)
    assert payload_groups(recs) == [[P, 3 * P]]


def test_budget_and_gap_options(tmp_path):
    frames = [pkt(i * P) for i in range(5)]
    assert payload_groups(run_cli(tmp_path, frames, "--napi-budget", "2", "--hz", "250")) == [[2 * P, 2 * P, P]]
    # HZ 1000: the budget ends flush only packets held before this jiffy; 10 us apart, none is
    assert payload_groups(run_cli(tmp_path, frames, "--napi-budget", "2")) == [[5 * P]]
    # a second later the first aggregate is old: the next budget end (after 4 packets) flushes it
    assert payload_groups(run_cli(tmp_path, frames[:2] + ["sleep"] + frames[2:], "--napi-budget", "2",
                                  "--poll-gap", "none")) == [[4 * P, P]]
    assert main(["gro", str(tmp_path / "in.pcap"), str(tmp_path / "o.pcap"), "--hz", "0"]) == 2
    assert payload_groups(run_cli(tmp_path, frames, "--poll-gap", "5us")) == [[P] * 5]
    assert payload_groups(run_cli(tmp_path, frames, "--poll-gap", "none")) == [[5 * P]]


def test_non_tcp_and_odd_frames_pass_through(tmp_path):
    udp = bytes(12) + b"\x08\x00" + struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, SRC4, DST4) + bytes(8)
    arp = bytes(12) + b"\x08\x06" + bytes(28)
    short = bytes(10)
    frames = [pkt(0), udp, arp, short, pkt(P)]
    recs = run_cli(tmp_path, frames)
    assert len(recs) == 4
    assert [len(r[1]) for r in recs[:3]] == [len(udp), 60, 10] or len(recs) == 4


def test_pcapng_input(tmp_path):
    import dpkt
    p = tmp_path / "in.pcapng"
    with open(p, "wb") as f:
        w = dpkt.pcapng.Writer(f, snaplen=262144)
        for k, fr in enumerate([pkt(0), pkt(P)]):
            w.writepkt(fr, ts=1.0 + k * 1e-5)
    out = tmp_path / "out.pcap"
    assert main(["gro", str(p), str(out)]) == 0
    assert payload_groups(read_out(out)) == [[2 * P]]


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["gro", str(tmp_path / "missing.pcap"), str(tmp_path / "o.pcap")]) == 2
    (tmp_path / "x.pcap").write_bytes(b"not a pcap at all, sorry")
    assert main(["gro", str(tmp_path / "x.pcap"), str(tmp_path / "o.pcap")]) == 2
    write_pcap(tmp_path / "in.pcap", [pkt(0)])
    assert main(["gro", str(tmp_path / "in.pcap"), str(tmp_path / "o.pcap"), "--poll-gap", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("offloadkit gro:") for line in err)


def test_parse_duration():
    assert parse_duration_ns("1ms") == 1_000_000 and parse_duration_ns("250us") == 250_000
    assert parse_duration_ns("0.002") == 2_000_000 and parse_duration_ns("none") is None


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
def test_output_opens_in_tcpdump(tmp_path):
    run_cli(tmp_path, [pkt(0), pkt(P), pkt(2 * P, v=4)])
    r = subprocess.run(["tcpdump", "-n", "-r", str(tmp_path / "out.pcap")], capture_output=True, text=True)
    assert r.returncode == 0 and "length 300" in r.stdout


DATA = sorted(p for p in (__import__("pathlib").Path(__file__).resolve().parents[1] / "data").glob("*.pcap*"))


@pytest.mark.parametrize("path", DATA, ids=[p.name for p in DATA])
def test_every_fixture_capture_is_handled(tmp_path, path, capsys):
    """VLAN, QinQ, MPLS, PPPoE, VXLAN, IPv6, cooked, raw, pcapng: GRO keeps every payload byte and
    every packet's link type; a file with no link type the kit reads is one line, exit 2."""
    code = main(["gro", str(path), str(tmp_path / "o.pcap")])
    err = capsys.readouterr().err.strip().splitlines()
    if path.name.startswith("unsupported"):
        assert code == 2 and len(err) == 1 and err[0].startswith("offloadkit gro:") and "link type" in err[0]
        return
    assert code == 0
    before, after = read_capture(path).trace, read_capture(tmp_path / "o.pcap").trace
    assert len(after) <= len(before) and int(after.payload_len.sum()) == int(before.payload_len.sum())
    recs_in, _ = read_records(path)
    recs_out, _ = read_records(tmp_path / "o.pcap")
    assert sorted({r.linktype for r in recs_out}) == sorted({r.linktype for r in recs_in})


def test_fuzzed_frames_never_crash(tmp_path):
    rng = np.random.default_rng(1)
    base = [pkt(0), pkt(P, v=6), pkt(2 * P, ipip=True), pkt(0, ext=b"\0" * 6, v=6), pkt(3 * P, opts=ts_opt(1))]
    frames = []
    for _ in range(300):
        f = bytearray(base[rng.integers(len(base))])
        for _ in range(int(rng.integers(1, 6))):
            f[int(rng.integers(len(f)))] = int(rng.integers(256))
        frames.append(bytes(f[:int(rng.integers(1, len(f) + 1))]) if rng.random() < 0.2 else bytes(f))
    recs = run_cli(tmp_path, frames)
    assert len(recs) <= len(frames)


def test_empty_capture(tmp_path):
    recs = run_cli(tmp_path, [])
    assert recs == []


@pytest.mark.parametrize("argv,words", [(["--poll-gap", "1e20s"], "--poll-gap"), (["--poll-gap", "nan"], "--poll-gap"),
                                        (["--napi-budget", str(10**24)], "--napi-budget"),
                                        (["--napi-budget", "0"], "--napi-budget")])
def test_out_of_range_numbers_are_one_line_exit_2(tmp_path, capsys, argv, words):
    src = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "eth_us.pcap"
    assert main(["gro", str(src), str(tmp_path / "o.pcap"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
