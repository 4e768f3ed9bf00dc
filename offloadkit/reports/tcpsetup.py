"""Connection setup and field-by-field tcpdump comparison for the TCP-simulated reports.

The TCP simulator starts its flows established (no handshake, no request). A
report whose tcpdump excerpt begins with the handshake and an application
request gets those rows here, built from the scenario (the peer's clamped MSS
option, the sender's own MSS from its MTU, Linux's window scale) and moved in
front of the simulated packets; the request's bytes shift the sequence space of
the reverse direction, as they would on a real connection.

:func:`compare_lines` compares two tcpdump -v texts packet by packet on the
fields the kit promises (flags, seq range, ack, payload length, IP total length,
option kinds with MSS/wscale values and SACK blocks), ignoring timestamps,
addresses, ports, IP IDs, TTL, windows, TS values and checksums, and the
absolute (random) initial sequence numbers a SYN carries.
"""
from __future__ import annotations

import re

import numpy as np

from .. import codes
from ..trace import Trace

LINUX_TCP_RMEM_MAX = 6291456      # net.ipv4.tcp_rmem[2], 4.x default: window scale 7
TCP_INIT_RWND_SEGS = 20           # 4.x: initial receive window of 20 MSS (29200 for MSS 1460)


def linux_wscale(space: int = LINUX_TCP_RMEM_MAX) -> int:
    """tcp_select_initial_window's window scale for a receive space."""
    w = 0
    while space > 65535 and w < 14:
        space >>= 1
        w += 1
    return w


def with_setup(sim: Trace, points: tuple[str, ...], *, peer_mss_option: int, own_mss_option: int,
               request_bytes: int = 0, rtt_ns: int, server_port: int | None = 80, opener: str = "peer") -> Trace:
    """``sim`` (one flow, established) with a handshake (and a request) in front, at every point.

    ``opener="peer"`` (a download): the peer (direction 1) sends SYN with
    ``peer_mss_option``, the sender answers SYN-ACK with ``own_mss_option``, the
    peer ACKs one RTT later and sends ``request_bytes``, the sender ACKs them.
    ``opener="sender"`` (an upload, e.g. netperf): SYN from the sender, SYN-ACK,
    ACK. The simulated transfer follows, its times shifted by one RTT and the
    reverse sequence space by the request. ``server_port``: the sender's port
    (None keeps the simulation's ports).
    """
    if opener not in ("peer", "sender"):
        raise ValueError(f"opener must be 'peer' or 'sender', not {opener!r}")
    if opener == "sender" and request_bytes:
        raise ValueError("a request needs the peer to open the connection (opener='peer')")
    data = sim[(sim.direction == 0) & (sim.payload_len > 0)]
    if len(data) == 0:
        raise ValueError("the simulation sent no data")
    first = data[0]
    isn_s = (int(first.seq[0]) - 1) & 0xFFFFFFFF      # the data starts at ISN + 1
    isn_r = (int(first.ack[0]) - 1) & 0xFFFFFFFF
    ts_s, ts_r = int(first.tsval[0]), int(first.tsecr[0])
    t_rtt_ms = rtt_ns // 1_000_000
    ws = linux_wscale()
    own_port, peer_port = connection_ports(first, server_port)
    S, A, P = codes.SYN, codes.ACK, codes.PSH
    own_win, peer_win = TCP_INIT_RWND_SEGS * (own_mss_option - 12), TCP_INIT_RWND_SEGS * (peer_mss_option - 12)
    # direction, seq, ack, flags, payload, mss option, wscale, sackok, time, tsval, tsecr, window
    if opener == "peer":
        rows = [
            (1, isn_r, 0, S, 0, peer_mss_option, ws, True, 0, ts_r - t_rtt_ms, 0, peer_win),
            (0, isn_s, isn_r + 1, S | A, 0, own_mss_option, ws, True, 1000, ts_s - t_rtt_ms, ts_r - t_rtt_ms,
             own_win),
            (1, isn_r + 1, isn_s + 1, A, 0, 0, -1, False, rtt_ns, ts_r, ts_s - t_rtt_ms, peer_win >> ws),
        ]
        if request_bytes:
            rows += [(1, isn_r + 1, isn_s + 1, P | A, request_bytes, 0, -1, False, rtt_ns + 1000, ts_r,
                      ts_s - t_rtt_ms, peer_win >> ws),
                     (0, isn_s + 1, isn_r + 1 + request_bytes, A, 0, 0, -1, False, rtt_ns + 2000, ts_s, ts_r,
                      own_win >> ws)]
    else:
        rows = [
            (0, isn_s, 0, S, 0, own_mss_option, ws, True, 0, ts_s - t_rtt_ms, 0, own_win),
            (1, isn_r, isn_s + 1, S | A, 0, peer_mss_option, ws, True, rtt_ns // 2, ts_r - t_rtt_ms,
             ts_s - t_rtt_ms, peer_win),
            (0, isn_s + 1, isn_r + 1, A, 0, 0, -1, False, rtt_ns, ts_s, ts_r - t_rtt_ms, own_win >> ws),
        ]
    n = len(rows)
    col = lambda k: np.array([r[k] for r in rows])
    opt_len = np.where(col(5) > 0, 20, 12)                 # SYN: mss+sackOK+TS+nop+wscale; else nop,nop,TS
    setup = Trace.from_columns(
        points=points, direction=col(0), seq=col(1) & 0xFFFFFFFF, ack=col(2) & 0xFFFFFFFF, flags=col(3),
        payload_len=col(4), opt_mss=col(5), opt_wscale=col(6), opt_sackok=col(7), time_ns=col(8),
        tsval=col(9) & 0xFFFFFFFF, tsecr=col(10) & 0xFFFFFFFF, window=np.minimum(col(11), 65535),
        opt_ts=np.ones(n, bool), tcp_hlen=20 + opt_len, ip_len=20 + 20 + opt_len + col(4),
        src_ip=np.where(col(0) == 0, first.src_ip[0], first.dst_ip[0]),
        dst_ip=np.where(col(0) == 0, first.dst_ip[0], first.src_ip[0]),
        sport=np.where(col(0) == 0, own_port, peer_port), dport=np.where(col(0) == 0, peer_port, own_port),
        ttl=np.full(n, 64), ip_id=np.where(col(3) == (S | A), 0, np.arange(n)))
    body = established(sim, request_bytes=request_bytes, rtt_ns=rtt_ns, server_port=server_port)
    parts = []
    for p in points:
        code = sim.point_code(p)
        parts.append(setup.replace(point=np.full(n, code)))
        parts.append(body.at(p))
    out = Trace.concat(parts)
    return Trace(out.columns, out.points, dict(sim.meta))


def connection_ports(first: Trace, server_port: int | None) -> tuple[int, int]:
    """(the sender's port, the peer's) of the connection whose first data packet is ``first``."""
    if server_port is None:
        return int(first.sport[0]), int(first.dport[0])
    return server_port, int(first.dport[0]) if int(first.dport[0]) != server_port else int(first.sport[0])


def established(sim: Trace, *, request_bytes: int = 0, rtt_ns: int, server_port: int | None = 80) -> Trace:
    """Simulated rows (one flow) as ``with_setup`` puts them behind the handshake: one RTT later, on
    ``server_port``, the reverse sequence space shifted by the request. A few rows (an excerpt) cost
    what they are; ``with_setup`` of the whole run is not needed for them."""
    data = sim[(sim.direction == 0) & (sim.payload_len > 0)]
    if len(data) == 0:
        return sim
    own_port, peer_port = connection_ports(data[0], server_port)
    d = sim.direction == 0
    return sim.replace(
        time_ns=sim.time_ns + rtt_ns + 3000,
        ack=np.where(d, (sim.ack.astype(np.int64) + request_bytes) & 0xFFFFFFFF, sim.ack),
        seq=np.where(d, sim.seq, (sim.seq.astype(np.int64) + request_bytes) & 0xFFFFFFFF),
        sport=np.where(d, own_port, peer_port), dport=np.where(d, peer_port, own_port))


# ------------------------------------------------------------------ comparing tcpdump text
_IPLEN = re.compile(r"proto TCP \(6\), length (\d+)")
_FLAGS = re.compile(r"Flags \[([^\]]*)\]")
_SEQ = re.compile(r", seq (\d+)(?::(\d+))?")
_ACK = re.compile(r", ack (\d+)")
_LEN = re.compile(r", length (\d+)")
_OPTS = re.compile(r"options \[([^\]]*)\]")


def packet_fields(text: str) -> dict:
    """The compared fields of one packet (``tcpdump -v``: IP line + TCP line joined)."""
    cut = text.find("Flags [")
    ip, tcp = (text[:cut], text[cut:]) if cut >= 0 else (text, "")

    def grab(rx, default=None, where=None):
        m = rx.search(tcp if where is None else where)
        return m.group(1) if m else default
    seq = _SEQ.search(tcp)
    opts = grab(_OPTS, "")
    opts = re.sub(r"TS val \d+ ecr \d+", "TS", opts)
    flags = grab(_FLAGS)
    if flags and "S" in flags:              # a SYN carries the random initial sequence numbers
        return {"flags": flags, "seq": "ISN", "ack": "ISN+1" if "." in flags else None, "length": grab(_LEN),
                "ip_length": grab(_IPLEN, where=ip), "options": opts}
    return {"flags": flags, "seq": (seq.group(1) + (":" + seq.group(2) if seq.group(2) else "")) if seq else None,
            "ack": grab(_ACK), "length": grab(_LEN), "ip_length": grab(_IPLEN, where=ip), "options": opts}


def packets(lines) -> list[str]:
    """Join tcpdump -v's two lines per packet into one text per packet."""
    out = []
    for line in lines:
        for part in line.split("\n"):
            if part.startswith((" ", "\t")) and out:
                out[-1] += " " + part.strip()
            elif part.strip():
                out.append(part.strip())
    return out


def compare_lines(model_lines, seed_lines) -> list[str]:
    """Mismatches between two tcpdump -v texts, packet by packet (empty: they match)."""
    m, s = packets(model_lines), packets(seed_lines)
    problems = []
    if len(m) != len(s):
        problems.append(f"{len(m)} model packets vs {len(s)} seed packets")
    for i, (a, b) in enumerate(zip(m, s)):
        fa, fb = packet_fields(a), packet_fields(b)
        for k in fa:
            if fa[k] != fb[k]:
                problems.append(f"packet {i + 1}: {k} model {fa[k]!r} vs seed {fb[k]!r}")
    return problems
