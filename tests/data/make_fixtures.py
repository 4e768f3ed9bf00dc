"""Build the small capture fixtures in tests/data/ (run: python tests/data/make_fixtures.py).

Every fixture comes from one known Trace (``base_trace``), so tests can compare
what the reader returns with what was written. Frames are built by
offloadkit.io.pcap and re-wrapped by hand for the other link types, pcapng and
byte orders. Deterministic: running the script twice gives identical bytes.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from offloadkit import codes as C  # noqa: E402
from offloadkit.packet import build  # noqa: E402
from offloadkit.packet.csum import ip_header_checksum  # noqa: E402
from offloadkit.packet.tcp_options import options_bytes  # noqa: E402
from offloadkit.trace import Trace  # noqa: E402

A, B = 0xC6120001, 0xC6120002          # 198.18.0.1, 198.18.0.2
A6 = list(bytes.fromhex("20010db8000000000000000000000001"))
B6 = list(bytes.fromhex("20010db8000000000000000000000002"))
T0 = 1_700_000_000_123_456_789          # ns; not a whole microsecond on purpose


def base_trace(payload_scale: int = 1, v6: bool = False) -> Trace:
    """A short connection: handshake, data (one 2896-byte super-packet), SACK, FIN."""
    s = payload_scale
    rows = [
        dict(src=A, dst=B, sp=40000, dp=5201, seq=1000, ack=0, fl=C.SYN, mss=1460, sok=True, ts=True,
             tv=5, te=0, ws=7, win=64240, id=1),
        dict(src=B, dst=A, sp=5201, dp=40000, seq=9000, ack=1001, fl=C.SYN | C.ACK, mss=1460, sok=True,
             ts=True, tv=6, te=5, ws=7, win=65160, id=0, cs=C.CSUM_PARTIAL),
        dict(src=A, dst=B, sp=40000, dp=5201, seq=1001, ack=9001, fl=C.ACK, ts=True, tv=7, te=6, win=502, id=2),
        dict(src=A, dst=B, sp=40000, dp=5201, seq=1001, ack=9001, fl=C.ACK | C.PSH, ts=True, tv=7, te=6,
             win=502, id=3, pl=1448 // s),
        dict(src=A, dst=B, sp=40000, dp=5201, seq=1001 + 1448 // s, ack=9001, fl=C.ACK, ts=True, tv=7, te=6,
             win=502, id=4, pl=2896 // s, bad=True, csum=0x1234),
        dict(src=B, dst=A, sp=5201, dp=40000, seq=9001, ack=1001 + 1448 // s, fl=C.ACK, ts=True, tv=8, te=7,
             win=500, id=5, sack=[1001 + 2896 // s, 1001 + 4344 // s]),
        dict(src=A, dst=B, sp=40000, dp=5201, seq=1001 + 4344 // s, ack=9001, fl=C.ACK | C.FIN, ts=True, tv=9,
             te=8, win=502, id=6, tos=2),
    ]
    n = len(rows)
    sack = np.zeros((n, 8), np.uint32)
    for i, r in enumerate(rows):
        if "sack" in r:
            sack[i, :2] = r["sack"]
    cols = dict(
        time_ns=T0 + np.arange(n, dtype=np.int64) * 1_000_333, frame=np.arange(1, n + 1),
        src_ip=[r["src"] for r in rows], dst_ip=[r["dst"] for r in rows],
        sport=[r["sp"] for r in rows], dport=[r["dp"] for r in rows],
        seq=[r["seq"] for r in rows], ack=[r["ack"] for r in rows], flags=[r["fl"] for r in rows],
        opt_mss=[r.get("mss", 0) for r in rows], opt_sackok=[r.get("sok", False) for r in rows],
        opt_ts=[r.get("ts", False) for r in rows], tsval=[r.get("tv", 0) for r in rows],
        tsecr=[r.get("te", 0) for r in rows], opt_wscale=[r.get("ws", -1) for r in rows],
        window=[r["win"] for r in rows], ip_id=[r["id"] for r in rows], payload_len=[r.get("pl", 0) for r in rows],
        csum_state=[r.get("cs", 0) for r in rows], csum_bad=[r.get("bad", False) for r in rows],
        tcp_csum=[r.get("csum", 0) for r in rows], sack_n=[1 if "sack" in r else 0 for r in rows], sack=sack,
        tos=[r.get("tos", 0) for r in rows],
    )
    t = Trace.from_columns(**cols)
    hl = np.array([20 + len(options_bytes(*a[1:])) for a in zip(
        t.flags.tolist(), t.opt_mss.tolist(), t.opt_sackok.tolist(), t.opt_ts.tolist(), t.tsval.tolist(),
        t.tsecr.tolist(), t.opt_wscale.tolist(), t.sack_n.tolist(), t.sack.tolist())])
    t = t.replace(tcp_hlen=hl, ip_len=20 + hl + t.payload_len)
    if v6:
        src6 = np.array([A6 if s == A else B6 for s in t.src_ip.tolist()], np.uint8)
        dst6 = np.array([A6 if d == A else B6 for d in t.dst_ip.tolist()], np.uint8)
        t = t.replace(ip_version=np.full(n, 6), src_ip6=src6, dst_ip6=dst6, src_ip=np.zeros(n), dst_ip=np.zeros(n),
                      ip_hlen=np.full(n, 40), ip_len=40 + hl + t.payload_len, ip_id=np.zeros(n))
    return t


def frames(trace: Trace, header_only: bool = False) -> list[tuple[int, bytes, int]]:
    """(time_ns, captured frame, original length) per row, as write_pcap builds them."""
    r = build.Rows(trace)
    out = []
    for i in range(len(trace)):
        l2, body, full = build.build_packet(r, i, None)
        frame = l2 + body
        orig = len(frame)
        if header_only:
            frame = frame[:len(frame) - trace.payload_len[i]]
        out.append((int(trace.time_ns[i]), frame, orig))
    return out


def pcap_bytes(pkts, linktype=1, nano=False, big_endian=False, snaplen=build.SNAPLEN, modified=False) -> bytes:
    e = ">" if big_endian else "<"
    magic = 0xA1B2CD34 if modified else 0xA1B23C4D if nano else 0xA1B2C3D4
    out = bytearray(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
    for t, frame, orig in pkts:
        sec, frac = divmod(t, 1_000_000_000)
        if not nano:
            frac //= 1000
        out += struct.pack(e + "IIII", sec, frac, len(frame), orig)
        if modified:
            out += struct.pack(e + "IHBB", 0, 0, 0, 0)
        out += frame
    return bytes(out)


def _opt(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(btype: int, body: bytes) -> bytes:
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def pcapng_bytes(interfaces, packets) -> bytes:
    """interfaces: [(linktype, tsresol byte or None, tsoffset_s)]; packets: [(iface, time_ns, frame, orig)]."""
    out = bytearray(_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + _opt(0, b"")))
    for lt, resol, off in interfaces:
        opts = b""
        if resol is not None:
            opts += _opt(9, bytes([resol]))
        if off:
            opts += _opt(14, struct.pack("<q", off))
        out += _block(1, struct.pack("<HHI", lt, 0, build.SNAPLEN) + opts + _opt(0, b""))
    out += _block(4, b"\0\0\0\0")                       # a name resolution block, to be skipped
    for iface, t, frame, orig in packets:
        lt, resol, off = interfaces[iface]
        t -= off * 1_000_000_000
        resol = 6 if resol is None else resol
        e = resol & 0x7F
        ts = (t << e) // 1_000_000_000 if resol & 0x80 else t // 10 ** (9 - e) if e <= 9 else t * 10 ** (e - 9)
        ts &= (1 << 64) - 1
        pad = b"\0" * (-len(frame) % 4)
        out += _block(6, struct.pack("<IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(frame), orig) + frame + pad)
    return bytes(out)


def strip_eth(frame: bytes) -> tuple[int, bytes]:
    return struct.unpack("!H", frame[12:14])[0], frame[14:]


def sll(frame: bytes) -> bytes:
    et, rest = strip_eth(frame)
    return struct.pack("!HHH", 0, 1, 6) + frame[6:12] + b"\0\0" + struct.pack("!H", et) + rest


def sll2(frame: bytes) -> bytes:
    et, rest = strip_eth(frame)
    return struct.pack("!HHIHBB", et, 0, 2, 1, 0, 6) + frame[6:12] + b"\0\0" + rest


def non_tcp_frames(t_ns: int) -> list[tuple[int, bytes, int]]:
    """An ARP request and a UDP/DNS packet: both must be skipped and counted."""
    arp = build.ETH_DST + build.ETH_SRC + b"\x08\x06" + bytes(28)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, bytes(4), bytes(4))
    ip = ip[:10] + struct.pack("!H", ip_header_checksum(ip)) + ip[12:]
    udp = build.ETH_DST + build.ETH_SRC + b"\x08\x00" + ip + struct.pack("!HHHH", 5353, 53, 8, 0)
    return [(t_ns, arp, len(arp)), (t_ns + 1, udp, len(udp))]


def with_encap(trace: Trace, **cols) -> Trace:
    n = len(trace)
    return trace.replace(**{k: np.full(n, v) for k, v in cols.items()})


def fixtures() -> dict[str, tuple[bytes, Trace]]:
    """name -> (file bytes, the trace its TCP packets should read back as)."""
    t = base_trace()
    small = base_trace(payload_scale=8)
    fx: dict[str, tuple[bytes, Trace]] = {}
    eth = frames(t)
    fx["eth_us.pcap"] = (pcap_bytes(eth), t)
    fx["eth_ns.pcap"] = (pcap_bytes(eth, nano=True), t)
    fx["eth_be.pcap"] = (pcap_bytes(eth, big_endian=True), t)
    fx["eth_modified.pcap"] = (pcap_bytes(eth, modified=True), t)
    fx["eth_small.pcap"] = (pcap_bytes(frames(small)), small)
    fx["header_only.pcap"] = (pcap_bytes(frames(t, header_only=True), snaplen=96), t.replace(
        truncated=t.payload_len > 0, csum_bad=np.zeros(len(t), bool)))
    mixed = eth[:3] + non_tcp_frames(eth[2][0] + 10) + eth[3:]
    fx["eth_non_tcp.pcap"] = (pcap_bytes(mixed), t)
    fx["sll.pcap"] = (pcap_bytes([(a, sll(f), o + 2) for a, f, o in eth], linktype=113), t)
    fx["sll2.pcap"] = (pcap_bytes([(a, sll2(f), o + 6) for a, f, o in eth], linktype=276), t)
    fx["raw4_228.pcap"] = (pcap_bytes([(a, f[14:], o - 14) for a, f, o in eth], linktype=228), t)
    fx["raw_101.pcap"] = (pcap_bytes([(a, f[14:], o - 14) for a, f, o in eth], linktype=101), t)
    fx["null_0.pcap"] = (pcap_bytes([(a, struct.pack("<I", 2) + f[14:], o - 10) for a, f, o in eth], linktype=0), t)
    t6 = base_trace(v6=True)
    fx["ipv6.pcap"] = (pcap_bytes(frames(t6)), t6)
    vlan = with_encap(t, encap=C.ENC_VLAN, vlan_tci=0x2064)
    fx["vlan.pcap"] = (pcap_bytes(frames(vlan)), vlan)
    qinq_frames = [(a, f[:12] + struct.pack("!HH", 0x88A8, 0x0007) + f[12:], o + 4) for a, f, o in frames(vlan)]
    fx["qinq.pcap"] = (pcap_bytes(qinq_frames), with_encap(t, encap=C.ENC_VLAN, vlan_tci=0x0007))
    mpls = with_encap(t, encap=C.ENC_MPLS, mpls_labels=2)
    fx["mpls.pcap"] = (pcap_bytes(frames(mpls)), mpls)
    pppoe = with_encap(t, encap=C.ENC_PPPOE)
    fx["pppoe.pcap"] = (pcap_bytes(frames(pppoe)), pppoe)
    vx = with_encap(t, encap=C.ENC_VXLAN, vni=4242, outer_udp_csum=0xBEEF)
    fx["vxlan.pcap"] = (pcap_bytes(frames(vx)), vx)
    tso = t.replace(ip_len=np.where(t.payload_len > 1448, 0, t.ip_len))
    tso_frames = [(a, f[:16] + (b"\0\0" if tso.ip_len[i] == 0 else f[16:18]) + f[18:], o)
                  for i, (a, f, o) in enumerate(eth)]
    tso_frames = [(a, _fix_ip_csum(f), o) for a, f, o in tso_frames]
    fx["iplen0.pcap"] = (pcap_bytes(tso_frames), t)
    # pcapng: interface 0 Ethernet in microseconds, interface 1 raw IPv4 in 2^-20 s, interface 2 SLL in ns
    pk = []
    for i, (a, f, o) in enumerate(eth):
        k = i % 3
        pk.append((k, a, f if k == 0 else f[14:] if k == 1 else sll(f), o if k == 0 else o - 14 if k == 1 else o + 2))
    ifs = [(1, None, 0), (228, 0x80 | 20, 0), (113, 9, 1_700_000_000)]
    fx["multi_if.pcapng"] = (pcapng_bytes(ifs, pk), t)
    fx["small.pcapng"] = (pcapng_bytes([(1, 9, 0)], [(0, a, f, o) for a, f, o in frames(small)]), small)
    fx["unsupported_147.pcap"] = (pcap_bytes(eth, linktype=147), Trace.empty())
    return fx


def _fix_ip_csum(frame: bytes) -> bytes:
    ip = frame[14:34]
    ip = ip[:10] + b"\0\0" + ip[12:]
    ip = ip[:10] + struct.pack("!H", ip_header_checksum(ip)) + ip[12:]
    return frame[:14] + ip + frame[34:]


def main() -> None:
    for name, (data, _) in fixtures().items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
