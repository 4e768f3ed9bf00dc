"""Internet-checksum arithmetic (RFC 1071) for IPv4, IPv6 and TCP, as numba kernels.

All sums are plain integers: a *sum* is an unfolded one's-complement
accumulator (any non-negative int64), ``fold16`` folds it to 16 bits and
``csum_finish`` complements it into the value written in a header.

Model traces carry no payload bytes. **The model's synthetic payload is all
zeros**, so a zero payload adds nothing to the sum and a full TCP checksum is
computable from header fields alone (the length still enters through the
pseudo-header). For captures that do carry payload, ``csum_bytes`` and
``tcp_checksum_buffer`` sum real byte buffers.

TCP options are not stored as bytes in a Trace; ``write_tcp_options`` lays
them out as Linux ``tcp_options_write`` does (MSS; SACK-permitted+TS or
NOP,NOP,TS; NOP,NOP,SACK-permitted; NOP,WS; NOP,NOP,SACK blocks), padded with
zero (EOL) bytes to ``tcp_hlen - 20``. Writers of model packets must use the
same layout so that the checksums here are the ones on the wire.

Correct vs deliberately wrong checksums:
- ``csum_finish`` is ``csum_fold`` as in ``gso_make_checksum`` (spec §1.2):
  it can produce 0x0000;
- ``csum_finish_mangled`` is what ``skb_checksum_help`` writes
  (``csum_fold(csum) ?: CSUM_MANGLED_0``): never 0x0000, 0xFFFF instead;
- ``tcp_pseudo_check`` is the folded, non-complemented pseudo-header sum a
  CHECKSUM_PARTIAL packet carries (``~tcp_v4_check(len, saddr, daddr, 0)``);
  tcpdump reports it as "incorrect" on the sending host;
- ``corrupt_checksum`` returns a value that never verifies (it flips the
  lowest bit, so it is never the equivalent 0x0000/0xFFFF twin).
"""
from __future__ import annotations

import numpy as np
from ..packet.jit import njit

from ..packet.csum import csum_bytes
from ..packet.tcp_options import (
    MAX_TCP_OPTION_BYTES,
    tcp_options_len,
    write_tcp_options,
)
from ..trace import Trace

IPPROTO_TCP = 6


@njit(cache=True)
def fold16(s):
    """Fold a one's-complement accumulator to 16 bits (not complemented)."""
    s = np.int64(s)
    s = (s & 0xFFFFFFFF) + (s >> 32)          # branch-free: four folds cover any s < 2**62
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return (s & 0xFFFF) + (s >> 16)


@njit(cache=True)
def csum_finish(s):
    """The checksum field for accumulator ``s`` (``csum_fold``; may be 0x0000)."""
    return (~fold16(s)) & 0xFFFF


@njit(cache=True)
def csum_finish_mangled(s):
    """``skb_checksum_help``'s value: like ``csum_finish`` but 0x0000 becomes 0xFFFF."""
    c = (~fold16(s)) & 0xFFFF
    return 0xFFFF if c == 0 else c


@njit(cache=True)
def corrupt_checksum(c):
    """A deliberately wrong checksum: never verifies, never the 0/0xFFFF twin of ``c``."""
    return (c ^ 1) & 0xFFFF


@njit(cache=True)
def addr_sum(ip):
    """Sum of the two 16-bit halves of an IPv4 address (uint32)."""
    ip = np.int64(ip) & 0xFFFFFFFF
    return (ip >> 16) + (ip & 0xFFFF)


@njit(cache=True)
def ip6_addr_sum(addr):
    """Sum of the eight 16-bit words of an IPv6 address (uint8[16])."""
    s = np.int64(0)
    for i in range(0, 16, 2):
        s += (np.int64(addr[i]) << 8) | np.int64(addr[i + 1])
    return s


@njit(cache=True)
def pseudo_addr_sum(ip_version, src_ip, dst_ip, src_ip6, dst_ip6):
    """Sum of the pseudo-header's two addresses: IPv4 (RFC 793) or IPv6 (RFC 8200 §8.1)."""
    if ip_version == 6:
        return ip6_addr_sum(src_ip6) + ip6_addr_sum(dst_ip6)
    return addr_sum(src_ip) + addr_sum(dst_ip)


@njit(cache=True)
def verify_sum(s):
    """True if a sum taken *including* the checksum field verifies (folds to 0xFFFF)."""
    return fold16(s) == 0xFFFF


# -- IPv4 header ---------------------------------------------------------

@njit(cache=True)
def ip_base_sum(ip_hlen, tos, df, frag, ttl, src_ip, dst_ip):
    """Sum of the IPv4 header words that segmentation does not change.

    Excludes total length and ID (add them per segment); the checksum field
    counts as zero; IP option bytes (``ip_hlen > 20``) are taken as zeros.
    """
    ip_hlen, tos, frag, ttl = np.int64(ip_hlen), np.int64(tos), np.int64(frag), np.int64(ttl)
    w0 = ((0x40 | ((ip_hlen >> 2) & 0xF)) << 8) | (tos & 0xFF)
    w3 = (0x4000 if df else 0) | (frag & 0xBFFF)
    w4 = ((ttl & 0xFF) << 8) | IPPROTO_TCP
    return np.int64(w0 + w3 + w4) + addr_sum(src_ip) + addr_sum(dst_ip)


@njit(cache=True)
def ip_tot_len_field(ip_len):
    """The 16-bit total-length field: 0 for a model super-packet above 65535 (BIG TCP)."""
    return ip_len if ip_len <= 0xFFFF else 0


@njit(cache=True)
def ip_checksum(ip_hlen, tos, ip_len, ip_id, df, frag, ttl, src_ip, dst_ip):
    """IPv4 header checksum from Trace header fields (``ip_send_check``)."""
    s = ip_base_sum(ip_hlen, tos, df, frag, ttl, src_ip, dst_ip)
    return csum_finish(s + ip_tot_len_field(ip_len) + (ip_id & 0xFFFF))


# -- TCP -----------------------------------------------------------------

@njit(cache=True)
def pseudo_sum(src_ip, dst_ip, tcp_len):
    """Unfolded pseudo-header sum for a TCP segment of ``tcp_len`` bytes (header + payload)."""
    return addr_sum(src_ip) + addr_sum(dst_ip) + IPPROTO_TCP + np.int64(tcp_len)


@njit(cache=True)
def tcp_pseudo_check(src_ip, dst_ip, tcp_len):
    """CHECKSUM_PARTIAL's field: ``~tcp_v4_check(len, saddr, daddr, 0)``, folded, not complemented."""
    return fold16(pseudo_sum(src_ip, dst_ip, tcp_len))


@njit(cache=True)
def tcp_flags_word(tcp_hlen, flags):
    """The doff/flags 16-bit word (doff << 12 | AE..FIN)."""
    tcp_hlen, flags = np.int64(tcp_hlen), np.int64(flags)
    return (((tcp_hlen >> 2) & 0xF) << 12) | (flags & 0x1FF)


@njit(cache=True)
def u32_sum(v):
    v = np.int64(v) & 0xFFFFFFFF
    return (v >> 16) + (v & 0xFFFF)


@njit(cache=True)
def tcp_options_sum(tcp_hlen, opt_mss, opt_sackok, opt_ts, tsval, tsecr, opt_wscale, sack_n, sack):
    """Sum of the option bytes (canonical layout, zero padded to ``tcp_hlen - 20``)."""
    space = tcp_hlen - 20
    if space <= 0:
        return np.int64(0)
    buf = np.zeros(MAX_TCP_OPTION_BYTES, dtype=np.uint8)
    n = write_tcp_options(buf, opt_mss, opt_sackok, opt_ts, tsval, tsecr, opt_wscale, sack_n, sack)
    return csum_bytes(buf, 0, min(n, space))


@njit(cache=True)
def tcp_base_sum(src_ip, dst_ip, sport, dport, ack, window, urg_ptr, options_sum):
    """Sum of the TCP words (pseudo-header addresses and protocol included) that
    segmentation does not change: add length, seq and the doff/flags word per segment."""
    return (addr_sum(src_ip) + addr_sum(dst_ip) + IPPROTO_TCP + np.int64(sport) + np.int64(dport)
            + u32_sum(ack) + np.int64(window) + np.int64(urg_ptr) + options_sum)


@njit(cache=True)
def tcp_checksum_from_base(base, tcp_hlen, payload_len, seq, flags, payload_sum):
    """Full TCP checksum from ``tcp_base_sum`` plus the per-segment fields (``csum_finish``)."""
    return csum_finish(base + np.int64(tcp_hlen + payload_len) + u32_sum(seq)
                       + tcp_flags_word(tcp_hlen, flags) + payload_sum)


@njit(cache=True)
def tcp_checksum(src_ip, dst_ip, sport, dport, seq, ack, tcp_hlen, flags, window, urg_ptr,
                 options_sum, payload_len, payload_sum):
    """Full RFC 793 TCP checksum from header fields; ``payload_sum`` is 0 for the model's zero payload."""
    base = tcp_base_sum(src_ip, dst_ip, sport, dport, ack, window, urg_ptr, options_sum)
    return tcp_checksum_from_base(base, tcp_hlen, payload_len, seq, flags, payload_sum)


@njit(cache=True)
def tcp_checksum_buffer(src_ip, dst_ip, buf, start, end):
    """Full TCP checksum of a real segment ``buf[start:end]`` (TCP header + payload).

    The checksum field in the buffer (bytes 16-17 of the TCP header) is
    ignored, so the buffer may hold any old value there.
    """
    s = pseudo_sum(src_ip, dst_ip, end - start) + csum_bytes(buf, start, end)
    s -= (np.int64(buf[start + 16]) << 8) | np.int64(buf[start + 17])
    return csum_finish(s)


@njit(cache=True)
def ip_checksum_buffer(buf, start, ip_hlen):
    """IPv4 header checksum of real header bytes (checksum field ignored)."""
    s = csum_bytes(buf, start, start + ip_hlen)
    s -= (np.int64(buf[start + 10]) << 8) | np.int64(buf[start + 11])
    return csum_finish(s)


# -- column kernels ------------------------------------------------------

@njit(cache=True)
def ip_checksum_kernel(ip_hlen, tos, ip_len, ip_id, df, frag, ttl, src_ip, dst_ip, out):
    """``out[i]`` = IPv4 header checksum of row i."""
    for i in range(len(out)):
        out[i] = ip_checksum(ip_hlen[i], tos[i], ip_len[i], ip_id[i], df[i], frag[i], ttl[i],
                             src_ip[i], dst_ip[i])


@njit(cache=True)
def tcp_options_sum_kernel(tcp_hlen, opt_mss, opt_sackok, opt_ts, tsval, tsecr, opt_wscale,
                           sack_n, sack, out):
    """``out[i]`` = option-byte sum of row i (canonical layout)."""
    buf = np.zeros(MAX_TCP_OPTION_BYTES, dtype=np.uint8)
    for i in range(len(out)):
        space = tcp_hlen[i] - 20
        if space <= 0:
            out[i] = 0
            continue
        buf[:] = 0
        n = write_tcp_options(buf, opt_mss[i], opt_sackok[i], opt_ts[i], tsval[i], tsecr[i],
                              opt_wscale[i], sack_n[i], sack[i])
        out[i] = csum_bytes(buf, 0, min(n, space))


@njit(cache=True)
def tcp_checksum_kernel(src_ip, dst_ip, sport, dport, seq, ack, tcp_hlen, flags, window, urg_ptr,
                        options_sum, payload_len, out):
    """``out[i]`` = full TCP checksum of row i with the model's zero payload."""
    for i in range(len(out)):
        out[i] = tcp_checksum(src_ip[i], dst_ip[i], sport[i], dport[i], seq[i], ack[i], tcp_hlen[i],
                              flags[i], window[i], urg_ptr[i], options_sum[i], payload_len[i], 0)


@njit(cache=True)
def tcp_pseudo_kernel(src_ip, dst_ip, tcp_hlen, payload_len, out):
    """``out[i]`` = the CHECKSUM_PARTIAL pseudo-header value of row i."""
    for i in range(len(out)):
        out[i] = tcp_pseudo_check(src_ip[i], dst_ip[i], np.int64(tcp_hlen[i]) + payload_len[i])


# -- Python conveniences over a Trace -------------------------------------

def options_sums(trace) -> np.ndarray:
    """Option-byte sums (int64) of every row of a Trace."""
    out = np.zeros(len(trace), dtype=np.int64)
    c = trace.columns
    tcp_options_sum_kernel(c["tcp_hlen"], c["opt_mss"], c["opt_sackok"], c["opt_ts"], c["tsval"],
                           c["tsecr"], c["opt_wscale"], c["sack_n"], c["sack"], out)
    return out


def tcp_options_bytes(trace, i: int) -> bytes:
    """The option bytes of row ``i`` in the canonical layout, padded to ``tcp_hlen - 20``."""
    c = trace.columns
    buf = np.zeros(MAX_TCP_OPTION_BYTES, dtype=np.uint8)
    write_tcp_options(buf, c["opt_mss"][i], c["opt_sackok"][i], c["opt_ts"][i], c["tsval"][i],
                      c["tsecr"][i], c["opt_wscale"][i], c["sack_n"][i], c["sack"][i])
    space = max(int(c["tcp_hlen"][i]) - 20, 0)
    return bytes(buf[:space])


def trace_checksums(trace, full: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(IP header checksums, TCP checksums) of every row computed from its fields.

    ``full=True``: the complete TCP checksum over the zero model payload;
    ``full=False``: the CHECKSUM_PARTIAL pseudo-header value.
    """
    c = trace.columns
    n = len(trace)
    ip = np.zeros(n, dtype=np.uint16)
    ip_checksum_kernel(c["ip_hlen"], c["tos"], c["ip_len"], c["ip_id"], c["df"], c["frag"], c["ttl"],
                       c["src_ip"], c["dst_ip"], ip)
    tcp = np.zeros(n, dtype=np.uint16)
    if full:
        tcp_checksum_kernel(c["src_ip"], c["dst_ip"], c["sport"], c["dport"], c["seq"], c["ack"],
                            c["tcp_hlen"], c["flags"], c["window"], c["urg_ptr"], options_sums(trace),
                            c["payload_len"], tcp)
    else:
        tcp_pseudo_kernel(c["src_ip"], c["dst_ip"], c["tcp_hlen"], c["payload_len"], tcp)
    return ip, tcp


def warmup() -> None:
    """Compile every kernel of this module on tiny inputs."""
    t = Trace.from_columns(src_ip=[0xC6120001], dst_ip=[0xC6120002], tcp_hlen=[32], opt_ts=[True],
                           payload_len=[100], ip_len=[152], sack_n=[1])
    trace_checksums(t, True)
    trace_checksums(t, False)
    buf = np.zeros(64, dtype=np.uint8)
    tcp_checksum_buffer(np.uint32(1), np.uint32(2), buf, 0, 40)
    pseudo_addr_sum(6, np.uint32(0), np.uint32(0), buf[:16], buf[16:32])
    pseudo_addr_sum(4, np.uint32(1), np.uint32(2), buf[:16], buf[16:32])
    ip_checksum_buffer(buf, 0, 20)
    csum_finish_mangled(np.int64(0xFFFF))
    corrupt_checksum(0)
    verify_sum(np.int64(0xFFFF))
    tcp_options_len(1460, True, True, 7, 0)
    tcp_checksum_from_base(np.int64(0), 32, 100, np.uint32(1), 0x18, np.int64(0))
