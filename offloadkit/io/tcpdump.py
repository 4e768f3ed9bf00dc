"""tcpdump text: render a Trace as ``tcpdump -n`` / ``tcpdump -n -v`` prints it, and parse it back.

Rendering follows tcpdump 4.99 (print-ip.c, print-ip6.c, print-tcp.c):

- sequence numbers relative per connection: the first packet with ACK (the SYN-ACK,
  or the first ACK of a capture without handshake) and every SYN print absolute
  numbers and set the connection's bases; later packets print ``seq - base``;
  packets without ACK always print absolute numbers;
- ``seq a:b`` only when there is payload or SYN/FIN/RST; ``ack`` only with ACK;
- options decoded from the bytes the kit writes to pcap (Linux layout), SACK
  edges relative like tcpdump;
- with ``verbose`` the IP line and ``cksum 0x.... (correct)`` /
  ``(incorrect -> 0x....)``. As tcpdump, no checksum verdict for a packet whose
  segment was not captured whole (``truncated`` rows).

The checksum value shown is the one :mod:`offloadkit.io.pcap` writes for the row
(synthetic payload is zeros). Encapsulations print as tcpdump prints the headers
packet/build.py writes (MPLS labels, PPPoE session, VXLAN outer packet; VLAN tags are
not shown without -e). Every form is tested line for line against tcpdump 4.99.
"""
from __future__ import annotations

import ipaddress
import re
import struct
from typing import Iterable

import numpy as np

from .. import codes
from ..packet import build, csum
from ..packet.decode import HOP_JUMBO_HLEN
from ..packet.tcp_options import options_bytes
from ..trace import FIELDS, MAX_SACK_BLOCKS, Trace
from .capture import assign_flows

# tcpdump 4.99 print-tcp.c tcp_flag_values, in table order (ACK after PSH).
TCPDUMP_FLAG_ORDER = ((codes.FIN, "F"), (codes.SYN, "S"), (codes.RST, "R"), (codes.PSH, "P"),
                      (codes.ACK, "."), (codes.URG, "U"), (codes.ECE, "E"), (codes.CWR, "W"))
PORT_NAMES = {"http": 80, "https": 443, "ssh": 22, "ftp": 21, "ftp-data": 20, "telnet": 23,
              "smtp": 25, "domain": 53, "pop3": 110, "imap": 143, "bgp": 179, "ldap": 389,
              "microsoft-ds": 445, "imaps": 993, "pop3s": 995, "http-alt": 8080,
              "webcache": 8080, "rsync": 873, "nfs": 2049, "mysql": 3306, "postgresql": 5432}
_HTTP_PORTS = (80, 8080, 3128)
ANNOTATE_PARTIAL = "[partial: the NIC completes it]"
ANNOTATE_BAD = "[wrong on purpose]"


def flags_text(flags: int) -> str:
    """Flag letters as tcpdump prints them between the brackets."""
    s = "".join(ch for bit, ch in TCPDUMP_FLAG_ORDER if flags & bit)
    return s or "none"


def _options_text(opts: bytes, rev: int, thseq: int, thack: int) -> str:
    """tcpdump's ``options [...]`` body for option bytes (print-tcp.c)."""
    names = {0: "eol", 1: "nop", 2: "mss", 3: "wscale", 4: "sackOK", 5: "sack", 8: "TS"}
    out, k, n = [], 0, len(opts)
    while k < n:
        kind = opts[k]
        if kind in (0, 1):
            ln = 1
        else:
            if k + 1 >= n:
                out.append(f"{names.get(kind, f'unknown-{kind}')}[bad opt]")
                break
            ln = opts[k + 1]
            if ln < 2 or ln > n - k:
                out.append(f"{names.get(kind, f'unknown-{kind}')}[bad opt]")
                break
        body = opts[k + 2:k + ln]
        name = names.get(kind, f"unknown-{kind}")
        if kind == 2 and len(body) >= 2:
            text = f"mss {struct.unpack('!H', body[:2])[0]}"
        elif kind == 3 and len(body) >= 1:
            text = f"wscale {body[0]}"
        elif kind == 8 and len(body) >= 8:
            text = "TS val %u ecr %u" % struct.unpack("!II", body[:8])
        elif kind == 5:
            if len(body) % 8:
                text = "sack invalid sack"
            else:
                edges = struct.unpack(f"!{len(body) // 4}I", body)
                base = thseq if rev else thack
                blocks = "".join("{%u:%u}" % ((edges[j] - base) & 0xFFFFFFFF, (edges[j + 1] - base) & 0xFFFFFFFF)
                                 for j in range(0, len(edges), 2))
                text = f"sack {len(body) // 8} {blocks}"
        elif kind in (0, 1, 4):
            text = name
        else:
            text = name + (" 0x" + body.hex() if body else "")
        datalen = {2: 2, 3: 1, 8: 8}.get(kind, len(body))
        expect = datalen + (1 if kind in (0, 1) else 2)
        if kind not in (0, 1) and expect != ln:
            text += f"[len {ln}]"
        out.append(text)
        k += ln
        if kind == 0:
            break
    return ",".join(out)


def _addr(version: int, v4: int, v6) -> str:
    if version == 6:
        return str(ipaddress.IPv6Address(bytes(v6)))
    return f"{v4 >> 24}.{v4 >> 16 & 255}.{v4 >> 8 & 255}.{v4 & 255}"


def _time_text(t_ns: int) -> str:
    us = t_ns // 1000
    sec, frac = divmod(us, 1_000_000)
    sec %= 86400
    return f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.{frac:06d} "


class SeqState:
    """tcpdump's per-connection relative sequence-number table (tcp_seq_hash)."""

    def __init__(self):
        self.table: dict[tuple, list[int]] = {}

    @staticmethod
    def key(src, sport: int, dst, dport: int) -> tuple[tuple, int]:
        rev = 1 if sport > dport or (sport == dport and src > dst) else 0
        return ((dst, src, dport, sport) if rev else (src, dst, sport, dport)), rev

    def lookup(self, key, rev: int, flags: int, seq: int, ack: int):
        """(printed seq, printed ack, thseq, thack) for a packet with absolute numbers."""
        th = self.table.get(key)
        if th is None or flags & codes.SYN:
            th = [(ack - 1) & 0xFFFFFFFF, seq] if rev else [seq, (ack - 1) & 0xFFFFFFFF]
            self.table[key] = th
            return seq, ack, th[0], th[1]
        if rev:
            return (seq - th[1]) & 0xFFFFFFFF, (ack - th[0]) & 0xFFFFFFFF, th[0], th[1]
        return (seq - th[0]) & 0xFFFFFFFF, (ack - th[1]) & 0xFFFFFFFF, th[0], th[1]


def render(trace: Trace, verbose: bool = False, relative: bool = True, time: bool = True,
           annotate: bool = False) -> list[str]:
    """One string per row, as tcpdump -n (-v) prints it.

    relative=False prints absolute sequence numbers (``tcpdump -S``); time=False
    omits the timestamp (``-t``); timestamps are ``time_ns`` as UTC time of day.
    In verbose mode an IPv4 row is two lines joined by "\\n" (tcpdump's IP line and
    the indented TCP line). A model packet longer than 65535 bytes has IP total
    length 0 on the wire and prints as tcpdump 4.99 prints it ("IP bad-len 0",
    "IP6 a > b: [|tcp]"). annotate=True (not tcpdump) labels deliberate checksum
    states after the verdict: "[partial: the NIC completes it]" / "[wrong on purpose]".
    """
    r = build.Rows(trace)
    c = r.c
    state = SeqState()
    out = []
    for i in range(len(trace)):
        v = c["ip_version"][i]
        flags = c["flags"][i]
        seq, ack = c["seq"][i], c["ack"][i]
        src = c["src_ip6"][i] if v == 6 else c["src_ip"][i]
        dst = c["dst_ip6"][i] if v == 6 else c["dst_ip"][i]
        src_k = bytes(src) if v == 6 else src
        dst_k = bytes(dst) if v == 6 else dst
        opts = options_bytes(c["opt_mss"][i], c["opt_sackok"][i], c["opt_ts"][i], c["tsval"][i],
                             c["tsecr"][i], c["opt_wscale"][i], c["sack_n"][i], c["sack"][i],
                             c["tcp_hlen"][i])
        thl = 20 + len(opts)
        plen = c["payload_len"][i]
        head = _time_text(c["time_ns"][i]) if time else ""
        jumbo = v == 6 and c["hbh_jumbo"][i]
        if not jumbo and ((thl + plen > 0xFFFF) if v == 6 else
                          (max(20, min(60, c["ip_hlen"][i] & ~3)) + thl + plen > 0xFFFF)):
            out.append(_oversized(c, i, v, head, verbose))
            continue
        ends = f"{_addr(v, c['src_ip'][i], c['src_ip6'][i])}.{c['sport'][i]} > " \
               f"{_addr(v, c['dst_ip'][i], c['dst_ip6'][i])}.{c['dport'][i]}: "
        if jumbo:           # BIG TCP: tcpdump prints the hop-by-hop jumbo header between IP and TCP
            ends = f"{_addr(6, 0, c['src_ip6'][i])} > {_addr(6, 0, c['dst_ip6'][i])}: HBH " + \
                   (f"(jumbo: {HOP_JUMBO_HLEN + thl + plen})  " if verbose else "") + \
                   f"{c['sport'][i]} > {c['dport'][i]}: "
        if relative and flags & codes.ACK:
            key, rev = state.key(src_k, c["sport"][i], dst_k, c["dport"][i])
            pseq, pack, thseq, thack = state.lookup(key, rev, flags, seq, ack)
        else:
            rev, pseq, pack, thseq, thack = 0, seq, ack, 0, 0
        tcp = [f"Flags [{flags_text(flags)}]"]
        if verbose and not c["truncated"][i]:
            tcp.append(_cksum_text(r, i, v, opts, thl, annotate))
        if plen > 0 or flags & (codes.SYN | codes.FIN | codes.RST):
            tcp.append(f"seq {pseq}" + (f":{(pseq + plen) & 0xFFFFFFFF}" if plen > 0 else ""))
        if flags & codes.ACK:
            tcp.append(f"ack {pack}")
        tcp.append(f"win {c['window'][i]}")
        if flags & codes.URG:
            tcp.append(f"urg {c['urg_ptr'][i]}")
        if opts:
            tcp.append(f"options [{_options_text(opts, rev, thseq, thack)}]")
        tcp.append(f"length {plen}")
        text = ", ".join(tcp)
        if plen > 0 and (c["sport"][i] in _HTTP_PORTS or c["dport"][i] in _HTTP_PORTS):
            text += ": HTTP"
        if c["encap"][i]:
            head = _encap_prefix(c, i, head, verbose, thl)
        if v == 6:
            ip = "IP6 "
            if verbose:
                nh, seg = ("Options (0)", 0) if jumbo else ("TCP (6)", thl + plen)
                ip += f"({_ip6_class_label(c, i)}hlim {c['ttl'][i]}, next-header {nh} payload length: {seg}) "
            out.append(f"{head}{ip}{ends}{text}")
        elif verbose:
            out.append(f"{head}IP ({_ip_text(c, i, thl)})\n    {ends}{text}")
        else:
            out.append(f"{head}IP {ends}{text}")
    return out


def _encap_prefix(c: dict, i: int, head: str, verbose: bool, thl: int) -> str:
    """What tcpdump prints before the inner IP packet for the encapsulations packet.build writes."""
    enc = c["encap"][i]
    pre = ""
    l2 = 14
    if enc & codes.ENC_VLAN:
        l2 += 4
    if enc & codes.ENC_PPPOE:
        pre += "PPPoE  [ses 0x1] "
        l2 += 8
    if enc & codes.ENC_MPLS:
        n = max(1, c["mpls_labels"][i])
        labels = [f"(label {16 + k}, tc 0, {'[S], ' if k == n - 1 else ''}ttl 64)" for k in range(n)]
        pre += "MPLS " + ("\n\t".join(labels) + "\n\t" if verbose else " ".join(labels) + " ")
        l2 += 4 * n
    if enc & (codes.ENC_VXLAN | codes.ENC_GENEVE):
        v = c["ip_version"][i]
        full = (40 if v == 6 else max(20, min(60, c["ip_hlen"][i] & ~3))) + thl + c["payload_len"][i]
        vni = c["vni"][i] if c["vni"][i] >= 0 else 1
        sport = 49152 + (c["sport"][i] ^ c["dport"][i]) % 16384
        if enc & codes.ENC_VXLAN:
            ends = f"198.18.255.1.{sport} > 198.18.255.2.{build.VXLAN_PORT}: VXLAN, flags [I] (0x08), vni {vni}\n"
        else:                # tcpdump prints a GENEVE frame's inner packet on the same line (-v: the next)
            ends = (f"198.18.255.1.{sport} > 198.18.255.2.{build.GENEVE_PORT}: Geneve, Flags [none], vni 0x{vni:x}"
                    + ("\n\t" if verbose else ": "))
        if verbose:
            outer = f"IP (tos 0x0, ttl 64, id 0, offset 0, flags [DF], proto UDP (17), length " \
                    f"{36 + l2 + full})\n    " + ends
        else:
            outer = "IP " + ends
        return head + outer + pre
    return head + pre


def _oversized(c: dict, i: int, v: int, head: str, verbose: bool) -> str:
    """tcpdump 4.99 on a packet whose IP length field is 0 (a > 64 KB super-packet)."""
    if v == 4:
        return f"{head}IP bad-len 0"
    ip = f"({_ip6_class_label(c, i)}hlim {c['ttl'][i]}, next-header TCP (6) payload length: 0) " if verbose else ""
    return f"{head}IP6 {ip}{_addr(6, 0, c['src_ip6'][i])} > {_addr(6, 0, c['dst_ip6'][i])}: [|tcp]"


def _ip6_class_label(c: dict, i: int) -> str:
    """tcpdump -v's "class 0x.., flowlabel 0x....., " of an IPv6 row (each only when non-zero)."""
    tc, fl = c["tos"][i], c["flow_label"][i]
    return (f"class 0x{tc:02x}, " if tc else "") + (f"flowlabel 0x{fl:05x}, " if fl else "")


def _ip_text(c: dict, i: int, thl: int) -> str:
    tos = c["tos"][i]
    ecn = {0: "", 1: ",ECT(1)", 2: ",ECT(0)", 3: ",CE"}[tos & 3]
    ttl = c["ttl"][i]
    ttl_s = f", ttl {ttl}" if ttl >= 1 else ""
    frag = c["frag"][i]
    fl = [s for bit, s in ((0x2000, "+"), (0x4000, "DF")) if (frag | (0x4000 if c["df"][i] else 0)) & bit]
    ihl = max(20, min(60, c["ip_hlen"][i] & ~3))
    total = ihl + thl + c["payload_len"][i]
    return (f"tos 0x{tos:x}{ecn}{ttl_s}, id {c['ip_id'][i]}, offset {(frag & 0x1FFF) * 8}, "
            f"flags [{', '.join(fl) or 'none'}], proto TCP (6), length {total if total <= 0xFFFF else 0}")


def _cksum_text(r, i: int, v: int, opts: bytes, thl: int, annotate: bool = False) -> str:
    c = r.c
    hdr = struct.pack("!HHIIBBHHH", c["sport"][i], c["dport"][i], c["seq"][i], c["ack"][i],
                      (thl // 4) << 4 | (c["flags"][i] >> 8 & 1), c["flags"][i] & 0xFF, c["window"][i], 0,
                      c["urg_ptr"][i]) + opts
    if v == 6:
        src, dst = bytes(c["src_ip6"][i]), bytes(c["dst_ip6"][i])
    else:
        src, dst = struct.pack("!I", c["src_ip"][i]), struct.pack("!I", c["dst_ip"][i])
    correct, partial = csum.tcp_checksums(src, dst, hdr, b"", c["payload_len"][i])
    field = csum.tcp_field_value(c["csum_state"][i], c["csum_bad"][i], c["tcp_csum"][i], correct, partial)
    should = csum.tcpdump_verdict(field, correct)
    text = f"cksum 0x{field:04x} " + ("(correct)" if should is None else f"(incorrect -> 0x{should:04x})")
    if annotate and c["csum_state"][i] == codes.CSUM_PARTIAL:
        text += " " + ANNOTATE_PARTIAL
    elif annotate and c["csum_bad"][i]:
        text += " " + ANNOTATE_BAD
    return text


# -- parsing ----------------------------------------------------------------
_TIME = re.compile(r"^\s*(?:(\d{4}-\d\d-\d\d) )?(\d{1,2}):(\d\d):(\d\d)\.(\d{1,9})\s+|^\s*(\d{9,12})\.(\d{1,9})\s+")
_IPHDR = re.compile(r"^IP \((.*?)\)\s*$")
_IP4V = re.compile(r"tos 0x([0-9a-f]+)(?:,CE|,ECT\([01]\))?(?:, ttl (\d+))?, id (\d+), offset (\d+), flags \[([^\]]*)\], "
                   r"proto \w+ \((\d+)\), length (\d+)")
_IP6V = re.compile(r"^IP6 \((?:class 0x([0-9a-f]+), )?(?:flowlabel 0x([0-9a-f]+), )?hlim (\d+), "
                   r"next-header \w+ \((\d+)\) payload length: (\d+)\) ")
_HBH = re.compile(r"(\S+) > (\S+): HBH (?:\(jumbo: (\d+)\)  )?([\w-]+) > ([\w-]+): ")
_ENDS = re.compile(r"(\S+)\.([\w-]+) > (\S+)\.([\w-]+): Flags \[([^\]]*)\]")
_CKSUM = re.compile(r"cksum 0x([0-9a-f]{1,4}) \((correct|incorrect -> 0x[0-9a-f]+)\)")
_SEQ = re.compile(r", seq (\d+)(?::(\d+))?")
_ACK = re.compile(r", ack (\d+)")
_WIN = re.compile(r", win (\d+)")
_URG = re.compile(r", urg (\d+)")
_OPTS = re.compile(r", options \[([^\]]*)\]")
_LEN = re.compile(r", length (\d+)")
_SACK = re.compile(r"\{(\d+):(\d+)\}")
_LETTER = {ch: bit for bit, ch in TCPDUMP_FLAG_ORDER}
_LETTER["e"] = codes.AE
_OPTLEN = {"mss": 4, "sackOK": 2, "TS": 10, "nop": 1, "wscale": 3, "eol": 1}


def _parse_addr(text: str) -> tuple[int, int, bytes, bool]:
    """(version, v4 int, v6 bytes, obfuscated) of an address, 'x' digits read as 0."""
    obf = "x" in text
    clean = text.replace("x", "0")
    if ":" in clean:
        return 6, 0, ipaddress.IPv6Address(clean).packed, obf
    parts = [int(p) & 255 for p in clean.split(".")]
    if len(parts) != 4:
        raise ValueError(text)
    return 4, parts[0] << 24 | parts[1] << 16 | parts[2] << 8 | parts[3], bytes(16), obf


def _parse_port(text: str) -> int:
    if text.isdigit():
        return int(text) & 0xFFFF
    if text in PORT_NAMES:
        return PORT_NAMES[text]
    raise ValueError(f"unknown port name {text!r}")


_VXLAN = re.compile(r"VXLAN, flags \[\w*\] \(0x[0-9a-f]+\), vni (\d+)")
_GENEVE = re.compile(r"Geneve, Flags \[[^\]]*\], vni 0x([0-9a-f]+)(?:, options \[[^\]]*\])?(?:: |$)")


def _logical_lines(lines: Iterable[str]) -> list[tuple[str, str, dict]]:
    """(timestamp, IP header + TCP text, encapsulation) per packet; -v continuation lines are
    joined, lines without a timestamp (VXLAN inner, MPLS -v) take the last one."""
    out, pending, last_stamp, enc = [], None, "", {}
    for raw in lines:
        line = raw.rstrip("\n")
        m = _TIME.match(line)
        rest = line[m.end():] if m else line.strip()
        if m:
            last_stamp, enc = line[:m.end()], {}
        if pending is not None and not m and line[:1].isspace() and _ENDS.search(line):
            out.append((pending[0], pending[1] + " " + line.strip(), pending[2]))
            pending = None
            continue
        pending = None
        mv = _VXLAN.search(rest)
        if mv and "Flags [" not in rest:
            enc = {"encap": codes.ENC_VXLAN, "vni": int(mv.group(1))}
            continue
        mg = _GENEVE.search(rest)
        if mg:                   # the inner packet follows on the same line (-v: on the next ones)
            enc = {"encap": codes.ENC_GENEVE, "vni": int(mg.group(1), 16)}
            rest = rest[mg.end():]
            if not rest.strip():
                continue
        if rest.startswith(("MPLS", "PPPoE", "(label")):
            enc = dict(enc)
            if "MPLS" in rest or rest.startswith("(label"):
                enc["encap"] = enc.get("encap", 0) | codes.ENC_MPLS
                enc["mpls_labels"] = enc.get("mpls_labels", 0) + rest.count("(label")
            if rest.startswith("PPPoE"):
                enc["encap"] = enc.get("encap", 0) | codes.ENC_PPPOE
            cut = re.search(r"\bIP6? ", rest)
            if not cut:
                continue
            rest = rest[cut.start():]
        if _IPHDR.match(rest.strip()):
            pending = (last_stamp, rest.strip(), enc)
        elif (rest.startswith("IP ") or rest.startswith("IP6 ")) and (_ENDS.search(rest) or _HBH.search(rest)):
            out.append((last_stamp, rest, enc))
    return out


def _stamp_ns(stamp: str) -> int:
    m = _TIME.match(stamp) if stamp else None
    if not m:
        return 0
    if m.group(6):
        return int(m.group(6)) * 1_000_000_000 + int(m.group(7).ljust(9, "0"))
    h, mi, s, frac = int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5)
    return ((h * 60 + mi) * 60 + s) * 1_000_000_000 + int(frac.ljust(9, "0"))


def parse(lines: Iterable[str] | str) -> Trace:
    """A Trace from tcpdump -n or -n -v text (IPv4/IPv6 TCP); other lines are skipped.

    Relative sequence/ack numbers are made absolute with tcpdump's own rule (the
    first ACK or SYN packet of a connection prints absolute numbers). Obfuscated
    address digits ('x') read as 0; well-known port names become numbers. In -v
    text a TCP packet printed without a checksum verdict was not captured whole:
    its row is marked ``truncated``. ``cksum (incorrect)`` sets ``csum_bad`` and
    keeps the printed value in ``tcp_csum``. A pure ACK has no seq in the text:
    it gets the sender's next sequence number.
    """
    lines = (lines if isinstance(lines, str) else "\n".join(lines)).splitlines()
    rows = []
    state = SeqState()
    next_seq: dict[tuple, int] = {}
    last_ack: dict[tuple, int] = {}
    obfuscated = False
    for stamp, text, enc in _logical_lines(lines):
        try:
            row, obf = _parse_one(stamp, text)
        except ValueError:
            continue
        row.update(enc)
        obfuscated |= obf
        flags = row["flags"]
        src_k = bytes(row["src_ip6"]) if row["ip_version"] == 6 else row["src_ip"]
        dst_k = bytes(row["dst_ip6"]) if row["ip_version"] == 6 else row["dst_ip"]
        me, other = (src_k, row["sport"], dst_k, row["dport"]), (dst_k, row["dport"], src_k, row["sport"])
        seq, ack, has_seq = row.pop("_seq"), row.pop("_ack"), row.pop("_has_seq")
        key, rev = state.key(src_k, row["sport"], dst_k, row["dport"])
        th = state.table.get(key)
        relative = flags & codes.ACK and th is not None and not flags & codes.SYN
        if relative:
            own, peer = (th[1], th[0]) if rev else (th[0], th[1])
            ack = (ack + peer) & 0xFFFFFFFF
            if has_seq:
                seq = (seq + own) & 0xFFFFFFFF
        if not has_seq:
            seq = next_seq.get(me, last_ack.get(other, seq))
        if flags & codes.ACK:
            _, _, thseq, thack = state.lookup(key, rev, flags, seq, ack)
        else:
            thseq, thack = 0, 0
        if row["sack_n"]:
            base = thseq if rev else thack
            m = 2 * row["sack_n"]
            row["sack"] = [(e + base) & 0xFFFFFFFF for e in row["sack"][:m]] + row["sack"][m:]
        row["seq"], row["ack"] = seq, ack
        end = (seq + row["payload_len"] + (1 if flags & codes.SYN else 0) + (1 if flags & codes.FIN else 0))
        next_seq[me] = end & 0xFFFFFFFF
        if flags & codes.ACK:
            last_ack[me] = ack
        rows.append(row)
    if not rows:
        return Trace.empty()
    cols = {k: np.asarray([r[k] for r in rows], dtype=FIELDS[k][0]) for k in rows[0]}
    cols["frame"] = np.arange(1, len(rows) + 1)
    meta = {"source": "tcpdump text"}
    if obfuscated:
        meta["obfuscated_addresses"] = True
    return assign_flows(Trace.from_columns(meta=meta, **cols))


def _parse_one(stamp: str, text: str) -> tuple[dict, bool]:
    row: dict = {"time_ns": _stamp_ns(stamp), "truncated": False, "csum_bad": False, "tcp_csum": 0,
                 "csum_state": 0, "encap": 0, "mpls_labels": 0, "vni": -1, "flow_label": 0, "hbh_jumbo": False}
    verbose = False
    m6 = _IP6V.match(text)
    if text.startswith("IP ("):
        mv = _IP4V.search(text)
        if not mv:
            raise ValueError("IP header")
        if int(mv.group(6)) != 6:
            raise ValueError("not TCP")
        verbose = True
        flags_s = mv.group(5)
        row.update(tos=int(mv.group(1), 16), ttl=int(mv.group(2) or 0), ip_id=int(mv.group(3)),
                   frag=int(mv.group(4)) // 8 | (0x2000 if "+" in flags_s else 0), df="DF" in flags_s,
                   ip_len=int(mv.group(7)))
    mh = _HBH.search(text)
    if mh:                  # BIG TCP: the hop-by-hop jumbo header before the TCP header
        text = text[:mh.start()] + f"{mh.group(1)}.{mh.group(4)} > {mh.group(2)}.{mh.group(5)}: " + text[mh.end():]
        row["hbh_jumbo"] = True
    if m6:
        verbose = True
        if int(m6.group(4)) != (0 if mh else 6):
            raise ValueError("not TCP")
        row.update(tos=int(m6.group(1) or "0", 16), flow_label=int(m6.group(2) or "0", 16), ttl=int(m6.group(3)),
                   df=True, **({} if mh else {"ip_len": 40 + int(m6.group(5))}))
    me = _ENDS.search(text)
    if not me:
        raise ValueError("no TCP")
    v, s4, s6, o1 = _parse_addr(me.group(1))
    v2, d4, d6, o2 = _parse_addr(me.group(3))
    row.update(ip_version=v, src_ip=s4, dst_ip=d4, src_ip6=list(s6), dst_ip6=list(d6),
               sport=_parse_port(me.group(2)), dport=_parse_port(me.group(4)))
    flags = 0
    for ch in me.group(5):
        flags |= _LETTER.get(ch, 0)
    row["flags"] = flags
    tcp = text[me.end():]
    mlen = _LEN.search(tcp)
    if not mlen:
        raise ValueError("no length")
    body = tcp[:mlen.end()]
    plen = int(mlen.group(1))
    row["payload_len"] = plen
    mc = _CKSUM.search(body)
    if mc:
        row["tcp_csum"] = int(mc.group(1), 16)
        row["csum_bad"] = mc.group(2) != "correct"
        if ANNOTATE_PARTIAL in body:
            row["csum_bad"], row["csum_state"] = False, codes.CSUM_PARTIAL
    elif verbose:
        row["truncated"] = True
    ms = _SEQ.search(body)
    row["_has_seq"] = ms is not None
    row["_seq"] = int(ms.group(1)) if ms else 0
    ma = _ACK.search(body)
    row["_ack"] = int(ma.group(1)) if ma else 0
    mw = _WIN.search(body)
    row["window"] = int(mw.group(1)) if mw else 0
    mu = _URG.search(body)
    row["urg_ptr"] = int(mu.group(1)) if mu else 0
    row.update(opt_mss=0, opt_sackok=False, opt_ts=False, tsval=0, tsecr=0, opt_wscale=-1, sack_n=0,
               sack=[0] * (2 * MAX_SACK_BLOCKS))
    olen = 0
    mo = _OPTS.search(body)
    if mo:
        for item in mo.group(1).split(","):
            item = item.strip()
            word = item.split(" ")[0]
            if word == "mss":
                row["opt_mss"] = int(item.split()[1])
            elif word == "sackOK":
                row["opt_sackok"] = True
            elif word == "TS":
                parts = item.split()
                row["opt_ts"], row["tsval"], row["tsecr"] = True, int(parts[2]), int(parts[4])
            elif word == "wscale":
                row["opt_wscale"] = int(item.split()[1])
            elif word == "sack":
                edges = [int(x) for pair in _SACK.findall(item) for x in pair][:2 * MAX_SACK_BLOCKS]
                row["sack_n"] = len(edges) // 2
                row["sack"] = edges + [0] * (2 * MAX_SACK_BLOCKS - len(edges))
                olen += 2 + 8 * row["sack_n"]
                continue
            olen += _OPTLEN.get(word, 0)
    thl = 20 + ((olen + 3) & ~3)
    row["tcp_hlen"] = min(thl, 60)
    if v == 4:
        row["ip_hlen"] = 20
        if "ip_len" not in row:
            row["ip_len"] = 20 + row["tcp_hlen"] + plen
    elif "ip_len" not in row:
        row["ip_len"] = 40 + (HOP_JUMBO_HLEN if mh else 0) + row["tcp_hlen"] + plen
    if v == 6:
        row["ip_hlen"] = 40 + (HOP_JUMBO_HLEN if mh else 0)
    return row, o1 or o2
