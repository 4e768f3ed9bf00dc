"""One unit parser for the whole kit: rates, times, sizes and counts as people write them.

* Sizes are bytes, SI decimal: ``4M``/``4MB`` = 4,000,000; ``KiB``/``MiB``/``GiB``/``TiB`` are
  binary (``64KiB`` = 65,536). A lower-case ``b`` after a prefix (``100Mb``) means bits and is
  refused for a size: write ``B``.
* Rates are bits per second, SI decimal: ``100Mbit`` = ``100Mbps`` = ``100M`` = 10^8 bit/s; a bare
  number is bit/s (as in tc). Bytes per second are converted (x8): ``100MB/s``, ``100MBps``,
  ``100MiB/s``: the capital ``B`` means bytes, the lower-case ``b``/``bit``/``bps`` bits. (tc's own
  ``mbps`` means *bytes*; write ``Mbit`` in tc and here to be unambiguous.)
* Times: ``s``, ``ms``, ``us``/``µs``, ``ns``; a bare number is seconds. Parsed to nanoseconds.
* Every value is checked where it is parsed: finite (``1e400`` and ``nan`` are refused), within
  the range the option allows (``minimum``/``maximum``, default: 0 .. 2^63-1, what an int64
  kernel can hold), and a rate is never 0. Errors are ``ValueError`` with one sentence that says
  what to write.
"""
from __future__ import annotations

import math
import re

INT64_MAX = 2**63 - 1

_NUMBER = re.compile(r"\s*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(\S*?)\s*")
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_TIME = {"": 10**9, "s": 10**9, "sec": 10**9, "ms": 10**6, "us": 10**3, "µs": 10**3, "μs": 10**3, "ns": 1}
# prefix (decimal or binary, any case), then the unit proper; b/bit/bps = bits, B/Bps/B/s = bytes
_RATE_UNIT = re.compile(r"(?P<prefix>(?:[kKmMgGtT]i?)?)(?P<unit>|bit|bits|bit/s|bps|b/s|Bps|B/s)")
_SIZE_UNIT = re.compile(r"(?P<prefix>(?:[kKmMgGtT]i?)?)(?P<unit>|B|bytes?)")


def _number(text, what: str, example: str, unit: str = "a number and a unit") -> tuple[float, str]:
    m = _NUMBER.fullmatch(str(text))
    if not m:
        raise ValueError(f"cannot read {what} {text!r}: write {unit}, e.g. {example}")
    return float(m.group(1)), m.group(2)


def _multiplier(prefix: str) -> int:
    p = prefix.lower()
    return _BINARY[p] if p in _BINARY else _DECIMAL[p]


def _show(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def check_range(value: float, text, what: str, minimum: float = 0, maximum: float = INT64_MAX,
                unit: str = "") -> float:
    """``value`` if finite and within [minimum, maximum], else a ValueError naming ``text``."""
    if not math.isfinite(value):
        raise ValueError(f"{what} {text!r} is not a finite number: write a value from "
                         f"{_show(minimum)}{unit} to {_show(maximum)}{unit}")
    if value < minimum or value > maximum:
        raise ValueError(f"{what} {text!r} is out of range: write a value from {_show(minimum)}{unit} "
                         f"to {_show(maximum)}{unit}")
    return value


def _quantity(text, what: str, example: str, factor_of, minimum: float, maximum: float, unit: str) -> int:
    """``text`` read as a number times ``factor_of(unit text)`` (None: unit not understood; a str:
    the sentence to say instead), rounded to an int and checked against the bounds."""
    if isinstance(text, bool):
        raise ValueError(f"cannot read {what} {text!r}: write e.g. {example}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        value, suffix = _number(text, what, example)
        factor = factor_of(suffix)
        if not isinstance(factor, int):
            raise ValueError(f"cannot read {what} {text!r}: {factor}")
        value *= factor
    check_range(value, text, what, minimum, maximum, unit)
    return int(round(value))


def _rate_factor(suffix: str):
    m = _RATE_UNIT.fullmatch(suffix)
    if not m:
        return "write bits per second like 100Mbit or 1Gbit, or bytes per second like 12.5MB/s"
    return _multiplier(m.group("prefix")) * (8 if m.group("unit").startswith("B") else 1)


def _time_factor(suffix: str):
    return _TIME.get(suffix, "write a number and one of s, ms, us, ns, e.g. 20ms")


def _size_factor(suffix: str):
    m = _SIZE_UNIT.fullmatch(suffix)
    if m:
        return _multiplier(m.group("prefix"))
    hint = "a lower-case b means bits: write B for bytes, " if suffix.endswith("b") else ""
    return f"{hint}write bytes, e.g. 1500, 100MB or 64KiB"


def parse_rate(text, minimum: float = 1, maximum: float = 10**15) -> int:
    """'100Mbit' -> 100_000_000 bit/s; '100MB/s' -> 800_000_000 (see the module docstring).
    A rate below 1 bit/s (e.g. 0bit) or above ``maximum`` is refused."""
    return _quantity(text, "rate", "100Mbit, 9.6Mbit or 12.5MB/s", _rate_factor, minimum, maximum, " bit/s")


def parse_time(text, minimum: float = 0, maximum: float = INT64_MAX) -> int:
    """'20ms' -> 20_000_000 ns (units: s, ms, us, ns; a bare number is seconds); bounds in ns."""
    return _quantity(text, "time", "20ms or 10s", _time_factor, minimum, maximum, " ns")


def parse_size(text, minimum: float = 0, maximum: float = INT64_MAX) -> int:
    """'100MB' -> 100_000_000 bytes (B, kB, MB, GB, TB decimal; KiB, MiB, GiB, TiB binary)."""
    return _quantity(text, "size", "100MB or 64KiB", _size_factor, minimum, maximum, " B")


def parse_count(text, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """A whole number (``64``, ``1e3``, ``10k`` allowed when the value is whole) within bounds."""
    if isinstance(text, bool):
        raise ValueError(f"cannot read number {text!r}: write a whole number, e.g. 64")
    if isinstance(text, int):
        value = float(text) if abs(text) < 2**1023 else math.inf
    else:
        value, unit = _number(text, "number", "64", "a whole number")
        if unit.lower() not in _DECIMAL:
            raise ValueError(f"cannot read number {text!r}: write a whole number, e.g. 64")
        value *= _DECIMAL[unit.lower()]
    check_range(value, text, "number", minimum, maximum)
    if value != int(value):
        raise ValueError(f"number {text!r} is not a whole number: write e.g. {int(value)}")
    return int(value)


def parse_fraction(text, minimum: float = 0.0, maximum: float = 1.0) -> float:
    """A probability or share: ``0.001`` or ``0.1%`` -> 0.001, finite and within bounds."""
    s = str(text).strip()
    percent = s.endswith("%")
    value, unit = _number(s[:-1] if percent else s, "fraction", "0.001 or 0.1%")
    if unit:
        raise ValueError(f"cannot read fraction {text!r}: write e.g. 0.001 or 0.1%")
    return check_range(value / 100 if percent else value, text, "fraction", minimum, maximum)
