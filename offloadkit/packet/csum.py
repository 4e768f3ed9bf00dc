"""The Internet checksum over bytes (RFC 1071): the one place the kit sums real packet bytes.

A *sum* is an unfolded one's-complement accumulator; :func:`fold` folds it to
16 bits and a header's checksum field is ``~fold(sum) & 0xFFFF``. Python
functions serve the capture readers and writers; :func:`csum_bytes` is the numba
version the engine and the fast paths call on uint8 arrays. The engine's
field-level arithmetic (checksums from Trace columns, no bytes) is
``engine.csum_math``. ``lab/packets.py`` keeps its own sum on purpose (the
oracle's independent cross-check).
"""
from __future__ import annotations

import struct

import numpy as np
from .jit import njit

from .. import codes


@njit(cache=True)
def csum_bytes(buf, start, end):
    """Unfolded sum of big-endian 16-bit words of ``buf[start:end]`` (odd tail padded with 0)."""
    s = np.int64(0)
    i = start
    while i + 1 < end:
        s += (np.int64(buf[i]) << 8) | np.int64(buf[i + 1])
        i += 2
    if i < end:
        s += np.int64(buf[i]) << 8
    return s


def ones_sum(data: bytes, start: int = 0) -> int:
    """Unfolded one's-complement sum of ``data`` as big-endian 16-bit words."""
    if len(data) & 1:
        data = bytes(data) + b"\0"
    if len(data) > 256:
        return start + int(np.frombuffer(data, dtype=">u2").sum(dtype=np.uint64))
    return start + sum(struct.unpack(f"!{len(data) // 2}H", data))


def fold(s: int) -> int:
    """Fold a one's-complement sum to 16 bits (not complemented)."""
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def pseudo_sum(src: bytes, dst: bytes, length: int, proto: int = 6) -> int:
    """Unfolded sum of the TCP/UDP pseudo-header (addresses, protocol, length), IPv4 or IPv6."""
    return ones_sum(bytes(src) + bytes(dst)) + proto + (length >> 16) + (length & 0xFFFF)


def tcp_checksums(src: bytes, dst: bytes, tcp_header: bytes, payload: bytes,
                  payload_len: int) -> tuple[int, int]:
    """(correct checksum, CHECKSUM_PARTIAL pseudo-header value) of a TCP segment.

    ``tcp_header`` has its checksum field zeroed; ``payload`` may be shorter than
    ``payload_len`` (the rest counts as zeros).
    """
    ph = pseudo_sum(src, dst, len(tcp_header) + payload_len)
    s = ones_sum(tcp_header, ph)
    if payload:
        s = ones_sum(payload, s)
    return (~fold(s)) & 0xFFFF, fold(ph)


def tcpdump_verdict(field: int, correct: int) -> int | None:
    """None if tcpdump says "(correct)", else the value it prints after "incorrect ->"."""
    s_without = fold((~correct) & 0xFFFF)        # the sum over everything but the field
    computed = (~fold(s_without + field)) & 0xFFFF
    if computed == 0:
        return None
    return fold(field + computed)


def tcp_field_value(state: int, bad: bool, column: int, correct: int, partial: int) -> int:
    """The TCP checksum field a writer puts on the wire for one Trace row.

    PARTIAL: the pseudo-header sum; ``csum_bad``: the column (made wrong if it is
    right); otherwise the correct checksum."""
    if state == codes.CSUM_PARTIAL:
        return partial
    if bad:
        return column if tcpdump_verdict(column, correct) is not None else correct ^ 0xFFFF
    return correct


def ip_header_checksum(header: bytes) -> int:
    """The IPv4 header checksum field of ``header`` (its own checksum field zeroed)."""
    return (~fold(ones_sum(header))) & 0xFFFF


def verifies(data: bytes, start: int = 0) -> bool:
    """True if ``data`` (checksum field included) plus ``start`` sums to 0xFFFF."""
    return fold(ones_sum(data, start)) == 0xFFFF


@njit(cache=True)
def fold_nb(s):
    """:func:`fold` for numba kernels."""
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s
