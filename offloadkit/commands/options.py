"""Shared argparse pieces for every verb, so that each option is spelled and checked the same way.

Types (``type=`` of ``add_argument``) built on :mod:`offloadkit.units`; a bad value becomes
argparse's one-line error naming the option, exit status 2::

    parser.add_argument("--rate", type=rate(), default="100Mbit")        # -> int bit/s
    parser.add_argument("--poll-gap", type=duration(maximum=10**12))    # -> int ns
    parser.add_argument("--bytes", type=size(minimum=1))                # -> int bytes
    parser.add_argument("--napi-budget", type=count(1, 2**31 - 1))      # -> int
    parser.add_argument("--loss", type=fraction(maximum=0.999))         # -> float (0.1% allowed)
    add_bool_flag(parser, "tso", True, "TSO and GSO")                  # --tso / --no-tso
    parser.add_argument("report", type=report_id)                       # rtl8139 or 000
    add_quiet(parser)                                                   # -q/--quiet

Defaults given as strings go through the type too, so ``default="100Mbit"`` arrives as an int.
"""
from __future__ import annotations

import argparse

from .. import units
from ..reports.facts import REPORT_IDS


def _typed(parse, name: str, **bounds):
    def convert(text):
        try:
            return parse(text, **bounds)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    convert.__name__ = name  # argparse says "invalid <name> value" when the type fails otherwise
    return convert


def rate(minimum: float = 1, maximum: float = 10**15):
    """Bits per second from ``100Mbit``, ``1Gbps``, ``12.5MB/s`` (bytes x8), within bounds."""
    return _typed(units.parse_rate, "rate", minimum=minimum, maximum=maximum)


def duration(minimum: float = 0, maximum: float = units.INT64_MAX):
    """Nanoseconds from ``20ms``, ``10s``, ``250us`` or a bare number of seconds, within bounds (ns)."""
    return _typed(units.parse_time, "duration", minimum=minimum, maximum=maximum)


def size(minimum: float = 0, maximum: float = units.INT64_MAX):
    """Bytes from ``1500``, ``100MB``, ``64KiB``, within bounds."""
    return _typed(units.parse_size, "size", minimum=minimum, maximum=maximum)


def count(minimum: int = 0, maximum: int = 2**31 - 1):
    """A whole number within bounds (default 0 .. 2^31-1)."""
    return _typed(units.parse_count, "count", minimum=minimum, maximum=maximum)


def fraction(minimum: float = 0.0, maximum: float = 1.0):
    """A probability from ``0.001`` or ``0.1%``, within bounds."""
    return _typed(units.parse_fraction, "fraction", minimum=minimum, maximum=maximum)


def report_id(text: str) -> str:
    """A report id, or the seed number the notebooks use: ``000``/``0`` -> ``rtl8139``."""
    s = str(text).strip().lower()
    if s in REPORT_IDS:
        return s
    if s.isdigit() and int(s) < len(REPORT_IDS):
        return REPORT_IDS[int(s)]
    numbered = ", ".join(f"{i:03d}={r}" for i, r in enumerate(REPORT_IDS))
    raise argparse.ArgumentTypeError(f"unknown report {text!r}: write one of {numbered}")


class _OnOffFlag(argparse.Action):
    """``--x`` and ``--no-x``; with ``onoff=True`` also ``--x on|off`` (the lab's older spelling)."""

    def __init__(self, option_strings, dest, default=None, help=None, onoff=False, **kwargs):
        super().__init__(option_strings, dest, nargs="?" if onoff else 0, default=default, help=help,
                         metavar="on|off" if onoff else None)

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string.startswith("--no-"):
            if values not in (None, []):
                parser.error(f"{option_string} takes no value")
            setattr(namespace, self.dest, False)
            return
        if values in (None, []) or values in ("on", "yes", "true", "1"):
            setattr(namespace, self.dest, True)
        elif values in ("off", "no", "false", "0"):
            setattr(namespace, self.dest, False)
        else:
            parser.error(f"argument {option_string}: {values!r}: write {option_string} or "
                         f"--no-{option_string[2:]} (or {option_string} on|off)")

    def format_usage(self):
        return " | ".join(self.option_strings)


def add_bool_flag(parser, name: str, default: bool | None, what: str, dest: str | None = None,
                  onoff: bool = False) -> None:
    """``--NAME`` / ``--no-NAME`` for ``what`` (``default`` None: "not set"); ``onoff=True`` also
    accepts ``--NAME on|off`` for verbs that used that spelling before."""
    state = {True: "on", False: "off", None: "not set"}[default]
    parser.add_argument(f"--{name}", f"--no-{name}", dest=dest or name.replace("-", "_"), action=_OnOffFlag,
                        default=default, onoff=onoff, help=f"{what}: --{name} or --no-{name} (default {state})")


def add_quiet(parser) -> None:
    """``-q/--quiet``: only results and errors, no progress or notes."""
    parser.add_argument("-q", "--quiet", action="store_true", help="print no progress or notes, only results")
