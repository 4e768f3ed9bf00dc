"""Path MTU probing (``net.ipv4.tcp_mtu_probing``): black-hole detection and the MTU search.

``tcp_mtup_init`` starts ``search_low`` at ``tcp_base_mss`` and ``search_high``
at the peer's MSS; probing is on from the start with ``tcp_mtu_probing = 2``.
With 1, ``tcp_write_timeout`` calls ``tcp_mtu_probing`` once the RTOs have
lasted ``retries1``'s model timeout since the first retransmission: the first
call turns probing on (the MSS drops to ``search_low``'s), later ones halve
``search_low``. ``tcp_sync_mss`` keeps the MSS at most that of ``search_low``.
The probes themselves (``tcp_mtu_probe``) are sent by ``sender.send``; a probe
that is acked raises ``search_low`` (:func:`tcp_mtup_probe_success`), one found
lost at snd_una lowers ``search_high`` (``recovery.recovery_state``).
"""
from __future__ import annotations

from ...packet.jit import njit

from .layout import (F_CWND, F_CWND_CNT, F_MSS, F_MTUP_ON, F_PMSS, F_PROBE_MTU, F_SEARCH_HI, F_SEARCH_LO,
                     F_SSTHRESH, F_STATE, INF, P_BASE_MSS, P_MSS, P_MTU_PROBING, P_THL, ST_OPEN)

#: tcp_write_timeout's black-hole test: retransmits_timed_out(sk, sysctl_tcp_retries1 = 3, 0) waits
#: tcp_model_timeout(3, TCP_RTO_MIN) = ((2 << 3) - 1) * 200 ms since the first retransmission
#: (retrans_stamp is stamped after it went out), so with a 200 ms RTO it fires at the 5th RTO: 6.2 s in exact
#: time, 6.3-6.7 s on the timer wheel (``Tcp.rto_timer``; the lab's 6.18 kernel: 6.63 s)
MTUP_BLACKHOLE_NS = 15 * 200_000_000
TCP_PROBE_THRESHOLD = 8          # net.ipv4.tcp_probe_threshold: stop searching below 8 bytes of MTU
TCP_MIN_SND_MSS = 48             # net.ipv4.tcp_min_snd_mss and tcp_mtu_probe_floor


@njit(cache=True, nogil=True, _nrt=False)
def tcp_sync_mss(W, f):
    """tcp_sync_mss: the MSS of the path MTU, and with probing on at most that of search_low."""
    F = W.F
    hdr = 20 + W.P[P_THL]
    if F[f, F_SEARCH_HI] > F[f, F_PMSS] + hdr:
        F[f, F_SEARCH_HI] = F[f, F_PMSS] + hdr
    mss = F[f, F_PMSS]
    if F[f, F_MTUP_ON]:
        mss = min(mss, F[f, F_SEARCH_LO] - hdr)
    F[f, F_MSS] = max(mss, TCP_MIN_SND_MSS)


@njit(cache=True, nogil=True, _nrt=False)
def tcp_mtup_init(W, f):
    """tcp_mtup_init: the search interval [base MSS, the peer's MSS] as MTUs; on with probing 2."""
    F = W.F
    P = W.P
    F[f, F_PMSS] = P[P_MSS]
    F[f, F_SEARCH_HI] = P[P_MSS] + 20 + P[P_THL]
    F[f, F_SEARCH_LO] = P[P_BASE_MSS] + 20 + P[P_THL]
    F[f, F_MTUP_ON] = P[P_MTU_PROBING] > 1
    tcp_sync_mss(W, f)


@njit(cache=True, nogil=True, _nrt=False)
def tcp_mtu_probing(W, f):
    """tcp_mtu_probing (black-hole detection, from tcp_write_timeout): turn probing on, or once on,
    halve search_low (at most tcp_base_mss, at least the probe floor), then tcp_sync_mss."""
    F = W.F
    hdr = 20 + W.P[P_THL]
    if not F[f, F_MTUP_ON]:
        F[f, F_MTUP_ON] = 1
    else:
        mss = (F[f, F_SEARCH_LO] - hdr) >> 1
        mss = max(min(W.P[P_BASE_MSS], mss), TCP_MIN_SND_MSS)
        F[f, F_SEARCH_LO] = mss + hdr
    tcp_sync_mss(W, f)


@njit(cache=True, nogil=True, _nrt=False)
def tcp_mtup_probe_success(W, f):
    """tcp_mtup_probe_success: the probe was acked: cwnd rescaled to the bigger packets, search_low up."""
    F = W.F
    hdr = 20 + W.P[P_THL]
    F[f, F_CWND] = max(F[f, F_CWND] * (F[f, F_MSS] + hdr) // F[f, F_PROBE_MTU], 1)
    F[f, F_CWND_CNT] = 0
    if F[f, F_STATE] == ST_OPEN and F[f, F_SSTHRESH] < INF:      # tcp_current_ssthresh
        F[f, F_SSTHRESH] = max(F[f, F_SSTHRESH], (F[f, F_CWND] >> 1) + (F[f, F_CWND] >> 2))
    F[f, F_SEARCH_LO] = F[f, F_PROBE_MTU]
    F[f, F_PROBE_MTU] = 0
    tcp_sync_mss(W, f)
