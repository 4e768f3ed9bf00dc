"""Plain-Python reference of TSO/GSO segmentation (kernel-offload-spec §1.2) and NIC quirks.

Deliberately simple and independent of ``offloadkit.engine``: rows are dicts,
checksums are computed by serialising real header bytes with ``struct`` and
summing them RFC 1071 style. The model payload is all zeros.
"""
from __future__ import annotations

import struct

FIN, PSH, CWR = 0x01, 0x08, 0x80
GSO_TCP_FIXEDID, GSO_TCP_ACCECN = 0x2, 0x8
CSUM_NONE, CSUM_PARTIAL = 0, 3
DROP_GSO_EPROTONOSUPPORT = 3

RTL_MODELS = ("rtl8139-legacy", "rtl8139-legacy-mask12", "rtl8139-clobbered", "rtl8139-fixed")


# -- checksums over bytes --------------------------------------------------

def ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def checksum(data: bytes) -> int:
    return ~ones_sum(data) & 0xFFFF


def options_bytes(r: dict) -> bytes:
    """Linux tcp_options_write layout, zero-padded to tcp_hlen - 20."""
    b = b""
    if r.get("opt_mss", 0):
        b += struct.pack("!BBH", 2, 4, r["opt_mss"])
    if r.get("opt_ts", False):
        b += (b"\x04\x02" if r.get("opt_sackok", False) else b"\x01\x01")
        b += struct.pack("!BBII", 8, 10, r.get("tsval", 0), r.get("tsecr", 0))
    elif r.get("opt_sackok", False):
        b += b"\x01\x01\x04\x02"
    if r.get("opt_wscale", -1) >= 0:
        b += struct.pack("!BBBB", 1, 3, 3, r["opt_wscale"])
    nblk = min(r.get("sack_n", 0), (40 - len(b) - 4) // 8)
    if nblk > 0:
        b += struct.pack("!BBBB", 1, 1, 5, 2 + 8 * nblk)
        for e in r["sack"][:2 * nblk]:
            b += struct.pack("!I", e)
    space = max(r["tcp_hlen"] - 20, 0)
    return (b + b"\0" * 40)[:space]


def ip_header_bytes(r: dict) -> bytes:
    ip_len = r["ip_len"] if r["ip_len"] <= 0xFFFF else 0
    frag = (0x4000 if r.get("df", True) else 0) | r.get("frag", 0)
    hdr = struct.pack("!BBHHHBBHII", 0x40 | (r["ip_hlen"] // 4), r.get("tos", 0), ip_len, r["ip_id"], frag,
                      r.get("ttl", 64), 6, 0, r["src_ip"], r["dst_ip"])
    return hdr + b"\0" * (r["ip_hlen"] - 20)


def ip_csum(r: dict) -> int:
    return checksum(ip_header_bytes(r))


def tcp_header_bytes(r: dict, check: int = 0) -> bytes:
    word = ((r["tcp_hlen"] // 4) << 12) | r["flags"]
    return struct.pack("!HHIIHHHH", r["sport"], r["dport"], r["seq"], r["ack"], word, r["window"], check,
                       r.get("urg_ptr", 0)) + options_bytes(r)


def pseudo_header(r: dict, tcp_len: int) -> bytes:
    """Pseudo-header words; a length above 65535 (model super-packet) is summed as 32 bits, as Linux does.
    IPv6 (RFC 8200 8.1): the 16-byte addresses, a 32-bit length, 3 zero bytes and the next header."""
    if r.get("ip_version", 4) == 6:
        return bytes(r["src_ip6"]) + bytes(r["dst_ip6"]) + struct.pack("!IxxxB", tcp_len, 6)
    return struct.pack("!IIHHH", r["src_ip"], r["dst_ip"], 6, tcp_len >> 16, tcp_len & 0xFFFF)


def tcp_full_csum(r: dict, payload: bytes | None = None) -> int:
    """RFC 793 checksum over pseudo header + TCP header + payload (zeros unless given)."""
    if payload is None:
        payload = bytes(r["payload_len"])
    seg = tcp_header_bytes(r) + payload
    return checksum(pseudo_header(r, len(seg)) + seg)


def tcp_pseudo_csum(r: dict) -> int:
    """The folded, non-complemented pseudo-header sum of a CHECKSUM_PARTIAL packet."""
    return ones_sum(pseudo_header(r, r["tcp_hlen"] + r["payload_len"]))


# -- segmentation ------------------------------------------------------------

def rtl_read_mss(gso: int, mask_bits: int, clobber: bool) -> int:
    field = (gso & 0x7FF) | 0x800          # LargeSend is bit 27 = bit 11 of the field
    if clobber:
        field &= ~((1 << 9) | (1 << 7) | (1 << 6) | (1 << 5) | (1 << 4))   # UNF TES OWC LNKF EXC
    return field & ((1 << mask_bits) - 1)


def chunk_for(nic: str, gso: int, r: dict, legacy_mtu: int = 1500) -> tuple[str, int]:
    """(model that segments, bytes per segment)."""
    if nic in RTL_MODELS and gso > 2047:
        return "hw-tso", gso
    if nic == "rtl8139-legacy":
        return nic, legacy_mtu - r["ip_hlen"] - r["tcp_hlen"]
    if nic == "rtl8139-legacy-mask12":
        return nic, rtl_read_mss(gso, 12, True)
    if nic == "rtl8139-clobbered":
        return nic, rtl_read_mss(gso, 11, True)
    return nic, gso


def segment_rows(rows: list[dict], gso_size: int | None = None, nic: str = "sw-gso", tx_csum: bool = True,
                 drop_reason: int = DROP_GSO_EPROTONOSUPPORT) -> list[dict]:
    """The output rows (dicts with ``src_row``) for input rows, in order."""
    out = []
    for i, r in enumerate(rows):
        g = gso_size if gso_size else r.get("gso_size", 0)
        L = r["payload_len"]
        v6 = r.get("ip_version", 4) == 6
        gso = r.get("drop", 0) == 0 and r.get("ip_version", 4) in (4, 6) and g > 0 and L > g
        if not gso:
            out.append(dict(r, src_row=i))
            continue
        if nic == "drop-gso":
            out.append(dict(r, src_row=i, drop=drop_reason))
            continue
        model, chunk = chunk_for("hw-tso" if v6 and nic in RTL_MODELS else nic, g, r)   # 8139cp: no TSO6
        ihl = r["ip_hlen"]
        jumbo = v6 and r.get("hbh_jumbo", False) and r["ip_len"] > 65536
        if jumbo:
            ihl -= 8                                  # the hop-by-hop jumbo header leaves every segment
        if chunk <= 0:
            pieces = [L]
        else:
            pieces = []
            left = L
            while left > 0:
                pieces.append(min(chunk, left))
                left -= chunk
        n = len(pieces)
        rtl = model in RTL_MODELS
        for k, pay in enumerate(pieces):
            s = dict(r, src_row=i)
            s["seq"] = (r["seq"] + k * chunk) % 2**32
            s["payload_len"] = pay
            f = r["flags"]
            if rtl:
                if n > 1:
                    f &= ~(PSH | FIN)
            else:
                if k < n - 1:
                    f &= ~(PSH | FIN)
                if k > 0 and not r.get("gso_type", 0) & GSO_TCP_ACCECN:
                    f &= ~CWR
            s["flags"] = f
            fixed = v6 or (not rtl and r.get("gso_type", 0) & GSO_TCP_FIXEDID)
            s["ip_id"] = r["ip_id"] if fixed else (r["ip_id"] + k) % 2**16
            s["ip_hlen"] = ihl
            s["hbh_jumbo"] = r.get("hbh_jumbo", False) and not jumbo
            s["ip_len"] = ihl + r["tcp_hlen"] + pay
            s["ip_csum"] = r["ip_csum"] if v6 else ip_csum(s)
            if model == "sw-gso" and tx_csum:
                s["tcp_csum"] = tcp_pseudo_csum(s)
                s["csum_state"] = CSUM_PARTIAL
            else:
                s["tcp_csum"] = tcp_full_csum(s)
                s["csum_state"] = CSUM_NONE
            s["gso_size"] = s["gso_segs"] = s["gso_type"] = 0
            s["drop"] = 0
            out.append(s)
    return out


ROW_FIELDS = ("seq", "payload_len", "flags", "ip_id", "ip_len", "ip_csum", "tcp_csum", "csum_state",
              "gso_size", "gso_segs", "gso_type", "drop", "ip_hlen", "hbh_jumbo", "src_row")


def trace_rows(trace) -> list[dict]:
    """A Trace as a list of plain dicts (Python ints/bools, sack as a list)."""
    cols = trace.columns
    rows = []
    for i in range(len(trace)):
        r = {}
        for k, v in cols.items():
            x = v[i]
            r[k] = [int(e) for e in x] if getattr(x, "ndim", 0) else x.item()
        rows.append(r)
    return rows
