"""One unit parser for the whole kit: rates, times and sizes as people write them.

Sizes and rates are SI decimal ("4M" = 4,000,000; "100Mbit" = 10^8 bit/s);
``KiB``/``MiB``/``GiB`` are binary. A bare number of seconds is a time.
"""
from __future__ import annotations

import re

_RATE = {"": 1, "bit": 1, "bps": 1, "k": 1e3, "kbit": 1e3, "kbps": 1e3, "m": 1e6, "mbit": 1e6, "mbps": 1e6,
         "g": 1e9, "gbit": 1e9, "gbps": 1e9, "t": 1e12, "tbit": 1e12}
_TIME = {"": 1e9, "s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1}
_SIZE = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1024, "m": 1e6, "mb": 1e6, "mib": 1 << 20,
         "g": 1e9, "gb": 1e9, "gib": 1 << 30}


def _parse(text, table: dict, what: str, example: str) -> int:
    if isinstance(text, (int, float)):
        return int(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zµ]*)\s*", str(text).lower())
    if not m or m.group(2) not in table:
        raise ValueError(f"cannot read {what} {text!r}: write a number and a unit, e.g. {example}")
    return int(round(float(m.group(1)) * table[m.group(2)]))


def parse_rate(text) -> int:
    """'100Mbit' -> 100_000_000 bit/s (units: bit, kbit, Mbit, Gbit; bps alike)."""
    return _parse(text, _RATE, "rate", "100Mbit or 9.6Mbit")


def parse_time(text) -> int:
    """'20ms' -> 20_000_000 ns (units: s, ms, us, ns; a bare number is seconds)."""
    return _parse(text, _TIME, "time", "20ms or 10s")


def parse_size(text) -> int:
    """'100MB' -> 100_000_000 bytes (units: B, KB, MB, GB decimal; KiB, MiB, GiB binary)."""
    return _parse(text, _SIZE, "size", "100MB or 64KiB")


def parse_fraction(text) -> float:
    """'1%' -> 0.01, '0.01' -> 0.01: a probability in [0, 1] ('%' means percent)."""
    s = str(text).strip()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(%?)", s.lower())
    if not m:
        raise ValueError(f"cannot read probability {text!r}: write a fraction or a percentage, e.g. 0.01 or 1%")
    p = float(m.group(1)) / (100 if m.group(2) else 1)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability {text!r} is not between 0 and 1 (0% and 100%)")
    return p
