"""The loop's storage: the World's arrays, the event heap, packet/ACK pools, recording, the RNG.

Heap keys are ``time << 20 | insertion counter``: events at the same time run
in the order they were scheduled, so a run is deterministic (the counter
wraps after 2**20 events, still deterministically). Hop events (a packet
arriving at hop ``b``) come in key order per hop, as a FIFO link serializes
them: only the earliest of each hop sits in the heap, the others wait in a
list through the packet pool (``EVQ`` head/tail per hop, ``PK_EV_NEXT``), so
the heap stays a few rows deep however many packets are queued, and events
pop in exactly the order of one heap holding them all. Random loss uses an
xorshift128 stream seeded from the Scenario seed. ``make_world`` allocates
every array from the parameter vector; ``sizes`` gives the capacities the
loop cannot outgrow. Column names: ``layout``.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from ...packet.jit import njit

from ...codes import ACK
from .layout import (AK_ACK, AK_FLOW, AK_LEN_COLS, AK_N, AK_S0, AK_TSECR, EV_HOP, FF_LEN, FP_LEN, F_LEN, G_AK_FRESH,
                     G_ATOP, G_FTOP, G_HN, G_HROWS, G_LEN, G_OVERFLOW, G_PK_FRESH, G_RECN, G_RECTOT, G_RNG, G_SEQNO,
                     HEAP_SEQ_MASK, HEAP_SHIFT, HS_COLS, MAX_POINTS, N_DROP_CODES, PK_EV_KEY, PK_EV_NEXT, PK_FLAGS,
                     PK_FLOW, PK_IPID, PK_IPLEN, PK_LEN, PK_LEN_COLS, PK_RETX, PK_SEQ, PK_TS, P_AKCAP, P_FLOWS,
                     P_HCAP, P_NHOPS, P_NPOINTS, P_OCAP, P_PKCAP, P_QCAP, P_REC_LIMIT, P_REC_RX, P_RXCAP, P_SEED, P_THL, P_UCAP,
                     R_ACK, R_COLS, R_DIR, R_DROP, R_FLAGS, R_FLOW, R_GRO, R_GSOX, R_GSO_SEGS, R_GSO_SIZE, R_IPID, R_IPLEN,
                     R_LEN, R_POINT, R_RETX, R_SACK0, R_SACKN, R_SEQ, R_TIME, R_TSECR, R_TSVAL, SMP_CAP)


World = namedtuple("World", "P HP HL NP FP G H PK FREE AK AFREE F FF U O REC RXQ HQ HS DROPS SM HELD HSORT EVQ",
                   defaults=(None, None))


# -- small building blocks ---------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def rand(G):
    """xorshift128 on 32-bit words kept in int64 (identical in plain Python): uniform in [0, 1)."""
    m = np.int64(0xFFFFFFFF)
    a = G_RNG
    t = G[a] ^ ((G[a] << 11) & m)
    G[a] = G[a + 1]
    G[a + 1] = G[a + 2]
    G[a + 2] = G[a + 3]
    G[a + 3] = (G[a + 3] ^ (G[a + 3] >> 19)) ^ (t ^ (t >> 8))
    return G[a + 3] / 4294967296.0


@njit(cache=True, nogil=True, _nrt=False)
def ser_ns(nbytes, rate_bps):
    """Serialization time of ``nbytes`` at ``rate_bps``, rounded up to whole ns."""
    return (np.int64(nbytes) * 8_000_000_000 + rate_bps - 1) // rate_bps


@njit(cache=True, nogil=True, _nrt=False)
def _heap_insert(H, n, key, val):
    """Sift (key, val) up into the binary heap of ``n`` rows."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if H[p, 0] <= key:
            break
        H[i, 0] = H[p, 0]
        H[i, 1] = H[p, 1]
        i = p
    H[i, 0] = key
    H[i, 1] = val


@njit(cache=True, nogil=True, _nrt=False)
def heap_push(W, t, kind, a, b):
    """Schedule an event. Heap rows are (key, value): key = time << 20 | insertion counter (FIFO among
    equal times, deterministic), value = kind | b << 4 | a << 24. A hop event (packet ``a`` arriving at
    hop ``b``) not earlier than the last one queued for that hop waits in the hop's list instead."""
    H = W.H
    G = W.G
    n = G[G_HN]
    if n >= H.shape[0]:
        G[G_OVERFLOW] |= 1
        return False
    key = (t << HEAP_SHIFT) | (G[G_SEQNO] & HEAP_SEQ_MASK)
    val = kind | (b << 4) | (a << 24)
    G[G_SEQNO] += 1
    G[G_HN] = n + 1
    if kind == EV_HOP:
        PK = W.PK
        Q = W.EVQ
        tail = Q[b, 1]
        if tail >= 0 and key >= PK[tail, PK_EV_KEY]:
            PK[tail, PK_EV_NEXT] = a                 # behind the hop's earlier packets
            PK[a, PK_EV_KEY] = key
            PK[a, PK_EV_NEXT] = -1
            Q[b, 1] = a
            return True
        if tail < 0:
            PK[a, PK_EV_KEY] = key                   # the hop's list starts with this one, in the heap
            PK[a, PK_EV_NEXT] = -1
            Q[b, 0] = a
            Q[b, 1] = a
    _heap_insert(H, G[G_HROWS], key, val)
    G[G_HROWS] += 1
    return True


@njit(cache=True, nogil=True, _nrt=False)
def heap_pop(W):
    """Remove the earliest event; returns (time, kind, a, b). A hop list's head leaving the heap puts
    the next packet of that list in."""
    H = W.H
    G = W.G
    k0 = H[0, 0]
    v0 = H[0, 1]
    n = G[G_HROWS] - 1
    G[G_HROWS] = n
    G[G_HN] -= 1
    if n > 0:
        lk = H[n, 0]
        lv = H[n, 1]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            ck = H[c, 0]
            if c + 1 < n and H[c + 1, 0] < ck:
                c += 1
                ck = H[c, 0]
            if lk <= ck:
                break
            H[i, 0] = ck
            H[i, 1] = H[c, 1]
            i = c
        H[i, 0] = lk
        H[i, 1] = lv
    kind = v0 & 15
    a = v0 >> 24
    b = (v0 >> 4) & 0xFFFFF
    if kind == EV_HOP and W.EVQ[b, 0] == a:
        Q = W.EVQ
        nxt = W.PK[a, PK_EV_NEXT]
        Q[b, 0] = nxt
        if nxt < 0:
            Q[b, 1] = -1
        else:
            _heap_insert(H, G[G_HROWS], W.PK[nxt, PK_EV_KEY], EV_HOP | (b << 4) | (nxt << 24))
            G[G_HROWS] += 1
    return k0 >> HEAP_SHIFT, kind, a, b


@njit(cache=True, nogil=True, _nrt=False)
def _pop_free(G, top, fresh, stack, overflow_bit):
    """Take an index from a free stack that starts as 0..n-1 (top n-1) without writing those n entries:
    below ``G[fresh]`` (the lowest the top has been) entry i is i."""
    if G[top] == 0:
        G[G_OVERFLOW] |= overflow_bit
        return -1
    G[top] -= 1
    i = G[top]
    if i < G[fresh]:
        G[fresh] = i
        return i
    return stack[i]


@njit(cache=True, nogil=True, _nrt=False)
def push_free(G, top, stack, idx):
    stack[G[top]] = idx
    G[top] += 1


@njit(cache=True, nogil=True, _nrt=False)
def pk_alloc(W):
    return _pop_free(W.G, G_FTOP, G_PK_FRESH, W.FREE, 2)


@njit(cache=True, nogil=True, _nrt=False)
def pk_free(W, pid):
    push_free(W.G, G_FTOP, W.FREE, pid)


@njit(cache=True, nogil=True, _nrt=False)
def ak_alloc(W):
    return _pop_free(W.G, G_ATOP, G_AK_FRESH, W.AFREE, 4)


@njit(cache=True, nogil=True, _nrt=False)
def rec_row(W, point, t):
    """Index of a new recorded row at ``point``, or -1 when that point's limit is reached."""
    P = W.P
    G = W.G
    if G[G_RECN + point] >= P[P_REC_LIMIT]:
        return -1
    G[G_RECN + point] += 1
    r = G[G_RECTOT]
    G[G_RECTOT] = r + 1
    R = W.REC
    R[r, R_TIME] = t
    R[r, R_POINT] = point
    for k in range(R_DIR, R_SACK0):                   # every field but the SACK edges (read up to R_SACKN)
        R[r, k] = 0
    R[r, R_GSOX] = 0
    return r


@njit(cache=True, nogil=True, _nrt=False)
def rec_pkt(W, point, t, pid, drop, gso_size, gso_segs, gro_reason):
    r = rec_row(W, point, t)
    if r < 0:
        return
    R = W.REC
    PK = W.PK
    R[r, R_FLOW] = PK[pid, PK_FLOW]
    R[r, R_SEQ] = PK[pid, PK_SEQ]
    R[r, R_LEN] = PK[pid, PK_LEN]
    R[r, R_FLAGS] = PK[pid, PK_FLAGS]
    R[r, R_IPID] = PK[pid, PK_IPID]
    R[r, R_TSVAL] = PK[pid, PK_TS]
    R[r, R_IPLEN] = PK[pid, PK_IPLEN]
    R[r, R_RETX] = PK[pid, PK_RETX]
    R[r, R_DROP] = drop
    R[r, R_GSO_SIZE] = gso_size
    R[r, R_GSO_SEGS] = gso_segs
    R[r, R_GRO] = gro_reason
    R[r, R_ACK] = 0


@njit(cache=True, nogil=True, _nrt=False)
def rec_ack(W, point, t, aid):
    r = rec_row(W, point, t)
    if r < 0:
        return
    R = W.REC
    AK = W.AK
    f = AK[aid, AK_FLOW]
    R[r, R_DIR] = 1
    R[r, R_FLOW] = f
    R[r, R_ACK] = AK[aid, AK_ACK]
    R[r, R_FLAGS] = ACK
    R[r, R_TSVAL] = t
    R[r, R_TSECR] = AK[aid, AK_TSECR]
    n = AK[aid, AK_N]
    R[r, R_SACKN] = n
    for k in range(2 * n):
        R[r, R_SACK0 + k] = AK[aid, AK_S0 + k]
    R[r, R_IPLEN] = 20 + W.P[P_THL] + (4 + 8 * n if n > 0 else 0)    # P_THL carries IPv6's 20 extra bytes


# -- building the arrays ----------------------------------------------------------

def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def seed_words(seed: int) -> np.ndarray:
    """Four non-zero 32-bit xorshift128 words from a seed (splitmix64)."""
    words = []
    x = int(seed) & (2**64 - 1)
    for _ in range(4):
        x = (x + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        z ^= z >> 31
        words.append((z & 0xFFFFFFFF) or 1)
    return np.array(words, dtype=np.int64)


def make_world(P: np.ndarray, HP: np.ndarray, HL: np.ndarray, NP: np.ndarray, FP: np.ndarray) -> World:
    """Allocate every array the loop needs, sized from the parameter vector (FP: per-flow parameters)."""
    nf = int(P[P_FLOWS])
    nh = int(P[P_NHOPS])
    npts = int(P[P_NPOINTS])
    ucap = int(P[P_UCAP])
    ocap = int(P[P_OCAP])
    pkcap = int(P[P_PKCAP])
    akcap = int(P[P_AKCAP])
    rec_rows = int(P[P_REC_LIMIT]) * (npts + 1 + int(P[P_REC_RX]))   # + the receiver's aggregates (and "rx")
    i64 = np.int64
    G = np.zeros(G_LEN + MAX_POINTS, i64)
    G[G_RNG:G_RNG + 4] = seed_words(int(P[P_SEED]))
    return World(
        P=P, HP=HP, HL=HL, NP=NP, FP=FP, G=G, H=np.zeros((int(P[P_HCAP]), 2), i64),
        PK=np.zeros((pkcap, PK_LEN_COLS), i64), FREE=np.zeros(pkcap, i64),
        AK=np.zeros((akcap, AK_LEN_COLS), i64), AFREE=np.zeros(akcap, i64),
        F=np.zeros((nf, F_LEN), i64), FF=np.zeros((nf, FF_LEN), np.float64),
        U=np.zeros((nf, ucap, 5), i64), O=np.zeros((nf * ocap, 3), i64),
        REC=np.empty((max(rec_rows, 1), R_COLS), i64), RXQ=np.zeros(int(P[P_RXCAP]), i64),
        HQ=np.zeros((nh, int(P[P_QCAP]), 2), i64), HS=np.zeros((nh, HS_COLS), i64),
        DROPS=np.zeros((N_DROP_CODES, 2), i64), SM=np.zeros((2 + 2 * nf, SMP_CAP + 1), i64),
        HELD=np.zeros(nf, i64), HSORT=np.zeros(nf, i64), EVQ=np.full((nh + 1, 2), -1, i64),
    )


def sizes(flows: int, mss_min: int, rwnd: int, queue_pkts_total: int, qcap: int, budget: int,
          segs_per_mss: int = 1) -> dict:
    """Pool and ring capacities that the loop cannot outgrow for these parameters.

    ``segs_per_mss``: wire segments the NIC can cut one MSS into (a model that
    reads a garbled MSS, e.g. rtl8139-clobbered, cuts into tiny segments); the
    packet pool, the heap and the receive queue grow with it.
    """
    units = rwnd // max(mss_min, 8) + 4 * 64
    ucap = _pow2(2 * units + 64)
    pk = flows * (4 * units * max(segs_per_mss, 1) + 512) + queue_pkts_total + 4096
    return dict(ucap=ucap, ocap=units + 16, pkcap=pk, akcap=flows * (units + 64) + 1024,
                hcap=pk + flows * (units + 256) + 4096, rxcap=pk, qcap=qcap)


def world_bytes(P: np.ndarray) -> int:
    """Memory ``make_world`` allocates for the parameter vector ``P`` (bytes)."""
    nf, nh, npts = int(P[P_FLOWS]), int(P[P_NHOPS]), int(P[P_NPOINTS])
    rows = (int(P[P_HCAP]) * 2 + int(P[P_PKCAP]) * (PK_LEN_COLS + 1) + int(P[P_AKCAP]) * (AK_LEN_COLS + 1)
            + nf * (F_LEN + FF_LEN + int(P[P_UCAP]) * 5) + nf * int(P[P_OCAP]) * 3
            + max(int(P[P_REC_LIMIT]) * (npts + 1 + int(P[P_REC_RX])), 1) * R_COLS + int(P[P_RXCAP])
            + nh * (int(P[P_QCAP]) * 2 + HS_COLS) + (nh + 1) * 2 + (2 + 2 * nf) * (SMP_CAP + 1) + nf * (FP_LEN + 1))
    return 8 * rows
