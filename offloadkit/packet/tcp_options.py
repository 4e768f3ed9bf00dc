"""TCP options: the one parser and the one writer (Linux ``tcp_options_write`` layout).

The writer lays options out as Linux does: MSS; SACK-permitted+TS or
NOP,NOP,TS; NOP,NOP,SACK-permitted; NOP,WS; NOP,NOP,SACK blocks, padded with
zero (EOL) bytes. :func:`write_tcp_options` is the numba kernel (the engine's
checksum arithmetic sums what it writes); :func:`options_bytes` is the same
layout as bytes for the frame builders. :func:`parse_options` reads the fields
a Trace keeps (``tcp_parse_options``: unknown kinds skipped by their length,
a malformed length ends the walk).
"""
from __future__ import annotations

import struct

import numpy as np
from .jit import njit

from ..trace import MAX_SACK_BLOCKS

MAX_TCP_OPTION_BYTES = 40


@njit(cache=True)
def write_tcp_options(out, opt_mss, opt_sackok, opt_ts, tsval, tsecr, opt_wscale, sack_n, sack):
    """Write options in Linux ``tcp_options_write`` order into ``out`` (uint8[>=40]); return bytes written.

    ``sack`` holds left/right edges (as Trace.sack rows). Stops before
    overflowing 40 bytes (at most 3 SACK blocks fit with timestamps).
    """
    n = 0
    if opt_mss > 0:
        out[0] = 2
        out[1] = 4
        out[2] = (np.int64(opt_mss) >> 8) & 0xFF
        out[3] = np.int64(opt_mss) & 0xFF
        n = 4
    if opt_ts:
        if opt_sackok:
            out[n] = 4
            out[n + 1] = 2
        else:
            out[n] = 1
            out[n + 1] = 1
        out[n + 2] = 8
        out[n + 3] = 10
        for i in range(4):
            out[n + 4 + i] = (np.int64(tsval) >> (24 - 8 * i)) & 0xFF
            out[n + 8 + i] = (np.int64(tsecr) >> (24 - 8 * i)) & 0xFF
        n += 12
    elif opt_sackok:
        out[n] = 1
        out[n + 1] = 1
        out[n + 2] = 4
        out[n + 3] = 2
        n += 4
    if opt_wscale >= 0:
        out[n] = 1
        out[n + 1] = 3
        out[n + 2] = 3
        out[n + 3] = np.int64(opt_wscale) & 0xFF
        n += 4
    nblk = min(np.int64(sack_n), (MAX_TCP_OPTION_BYTES - n - 4) // 8, sack.shape[0] // 2)
    if nblk > 0:
        out[n] = 1
        out[n + 1] = 1
        out[n + 2] = 5
        out[n + 3] = 2 + 8 * nblk
        n += 4
        for b in range(2 * nblk):
            v = np.int64(sack[b]) & 0xFFFFFFFF
            for i in range(4):
                out[n + i] = (v >> (24 - 8 * i)) & 0xFF
            n += 4
    return n


@njit(cache=True)
def tcp_options_len(opt_mss, opt_sackok, opt_ts, opt_wscale, sack_n):
    """Bytes of options ``write_tcp_options`` writes (before padding)."""
    n = 4 if opt_mss > 0 else 0
    if opt_ts:
        n += 12
    elif opt_sackok:
        n += 4
    if opt_wscale >= 0:
        n += 4
    nblk = min(np.int64(sack_n), (MAX_TCP_OPTION_BYTES - n - 4) // 8)
    if nblk > 0:
        n += 4 + 8 * nblk
    return n


def options_bytes(mss: int, sackok: bool, ts: bool, tsval: int, tsecr: int, wscale: int, sack_n: int,
                  sack, tcp_hlen: int = 0) -> bytes:
    """Option bytes in Linux order, padded (EOL) to 4 bytes and to ``tcp_hlen`` - 20."""
    buf = np.zeros(MAX_TCP_OPTION_BYTES, dtype=np.uint8)
    edges = np.zeros(2 * MAX_SACK_BLOCKS, dtype=np.int64)
    k = min(len(sack), 2 * MAX_SACK_BLOCKS)
    edges[:k] = [int(x) for x in list(sack)[:k]]
    n = write_tcp_options(buf, int(mss), bool(sackok), bool(ts), int(tsval), int(tsecr), int(wscale),
                          min(int(sack_n), MAX_SACK_BLOCKS), edges)
    want = max(n, min(max(tcp_hlen - 20, 0), MAX_TCP_OPTION_BYTES))
    return bytes(buf[:(want + 3) & ~3])


def parse_options(opts: bytes) -> dict:
    """The Trace option columns of TCP option bytes."""
    res = {"opt_mss": 0, "opt_sackok": False, "opt_ts": False, "tsval": 0, "tsecr": 0,
           "opt_wscale": -1, "sack_n": 0, "sack": [0] * (2 * MAX_SACK_BLOCKS)}
    k = 0
    while k < len(opts):
        kind = opts[k]
        if kind == 0:
            break
        if kind == 1:
            k += 1
            continue
        if k + 1 >= len(opts):
            break
        ln = opts[k + 1]
        if ln < 2 or k + ln > len(opts):
            break
        body = opts[k + 2:k + ln]
        if kind == 2 and ln == 4:
            res["opt_mss"] = struct.unpack("!H", body)[0]
        elif kind == 3 and ln == 3:
            res["opt_wscale"] = min(body[0], 127)
        elif kind == 4 and ln == 2:
            res["opt_sackok"] = True
        elif kind == 8 and ln == 10:
            res["opt_ts"] = True
            res["tsval"], res["tsecr"] = struct.unpack("!II", body)
        elif kind == 5 and (ln - 2) % 8 == 0:
            n = min((ln - 2) // 8, MAX_SACK_BLOCKS)
            res["sack_n"] = n
            res["sack"] = list(struct.unpack(f"!{2 * n}I", body[:8 * n])) + [0] * (2 * (MAX_SACK_BLOCKS - n))
        k += ln
    return res
