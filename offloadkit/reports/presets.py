"""Shared machinery of the report presets: variants, knobs, runs, fits, capture points.

Every report module (``offloadkit.reports.<id>``) defines

- ``REPORT``: its id; ``POINTS``: capture-point names, in path order;
- ``KNOBS``: the knobs ``run`` accepts, with their defaults (a :class:`Knob` each);
- ``VARIANTS``: named :class:`Variant` s (at least ``broken``, the reporter's
  ``workaround`` and the real ``fixed``), each a set of knob values;
- ``run(variant="broken", **overrides) -> PresetRun``;
- ``reproduce() -> Reproduction``: every target of ``data/reports/<id>.json``
  checked against the model, each row marked *fitted* or *predicted*;
- ``calibrate()``: the fitted physical parameters (:class:`Fit`), solved in code
  from one reported number each.

Knobs a dashboard moves have one name and meaning everywhere: ``mss`` (TCP
payload per segment), ``mtu``, ``tso``, ``gso``, ``gro``, ``tx_csum`` (the sending
device fills TCP checksums), ``rx_csum`` (the receiving NIC's checksum offload),
``sessions`` (see ``offloadkit.ui.controls.CONTROLS``).

This module gives the report-independent helpers: ``get``, ``variants``,
``points``, ``run_variant``, ``reproduce_all``, and ``settings_for``/``settings_mss``
for the presets themselves.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..engine.segment import check_mss_fits, mss_from_mtu
from ..trace import Trace
from . import get   # defined once, in offloadkit.reports; re-exported for the commands
from .facts import REPORT_IDS
from .table import Reproduction

VARIANT_ROLES = ("broken", "workaround", "fixed", "extra")


@dataclass(frozen=True)
class Knob:
    """One setting a dashboard may move: its default, type and what it means."""

    default: object
    help: str
    choices: tuple = ()
    lo: float | None = None
    hi: float | None = None

    def check(self, name: str, value):
        """The value, validated (ValueError names the knob and what is allowed)."""
        d = self.default
        if isinstance(d, bool):
            if not isinstance(value, (bool, int)) or value not in (0, 1, True, False):
                raise ValueError(f"knob {name!r} is on/off: give True or False, not {value!r}")
            return bool(value)
        if self.choices:
            if not any(value is c or (value == c and type(value) is type(c)) for c in self.choices):
                raise ValueError(f"knob {name!r} must be one of {', '.join(map(str, self.choices))}, not {value!r}")
            return value
        if isinstance(d, (int, float)) or d is None:
            if value is None and d is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"knob {name!r} needs a number ({self.help}), not {value!r}")
            if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
                raise ValueError(f"knob {name!r} = {value} is outside {self.lo}..{self.hi} ({self.help})")
            return type(d)(value) if isinstance(d, (int, float)) and not isinstance(d, bool) else value
        return value


@dataclass(frozen=True)
class Variant:
    """A named setup of one report: knob values and what it stands for."""

    name: str
    role: str
    title: str
    settings: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        if self.role not in VARIANT_ROLES:
            raise ValueError(f"variant {self.name!r}: role must be one of {VARIANT_ROLES}, not {self.role!r}")


@dataclass(frozen=True)
class Fit:
    """A physical parameter solved from one reported number (``target``)."""

    name: str
    value: float
    unit: str
    target: str            # the quantity (table row) it was solved from
    method: str            # how, in words
    prior: float | None = None   # the value data/ carried before the fit, if any

    def text(self) -> str:
        prior = f" (data/ had {self.prior:.6g})" if self.prior is not None else ""
        return f"{self.name} = {self.value:.6g} {self.unit}, fitted to {self.target}: {self.method}{prior}"


def settings_for(knobs: Mapping[str, Knob], variants: Mapping[str, Variant], variant: str,
                 overrides: Mapping[str, object]) -> dict:
    """Defaults, then the variant's settings, then the overrides (each validated)."""
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; this report has {', '.join(variants)}")
    out = {k: kn.default for k, kn in knobs.items()}
    for src in (variants[variant].settings, overrides):
        for k, v in src.items():
            if k not in knobs:
                raise ValueError(f"unknown knob {k!r}; this report's knobs are {', '.join(knobs)}")
            out[k] = knobs[k].check(k, v)
    return out


def settings_mss(s: Mapping[str, object]) -> int:
    """The ``mss`` knob, or by default what the ``mtu`` knob leaves with timestamps (MTU - 52).

    The rule and its ValueError are the engine's (``engine.segment.mss_from_mtu``,
    ``check_mss_fits``): "MSS 1600 does not fit in MTU 1500: ... leave 1448".
    """
    mss = s["mss"] if s["mss"] is not None else mss_from_mtu(s["mtu"])
    check_mss_fits(mss, s["mtu"])
    return int(mss)


class PresetRun:
    """One run of a preset: the settings, the engine's result and the packets at each capture point.

    ``result`` is the engine's own object (``simulate.Result`` for the TCP reports,
    ``engine.cpu.CpuResult`` for the CPU ones); ``trace`` holds every capture
    point in ``points`` (built on first use); ``goodput_bps`` is TCP payload
    bits per second.
    """

    def __init__(self, report: str, variant: str, settings: dict, result, points: tuple[str, ...],
                 trace_fn: Callable[[], object], goodput_bps: float, info: dict | None = None,
                 point_fn: Callable[[str], object] | None = None):
        self.report, self.variant, self.settings, self.result = report, variant, settings, result
        self.points = tuple(points)
        self._trace_fn = trace_fn
        self._point_fn = point_fn
        self.goodput_bps = float(goodput_bps)
        self.info = dict(info or {})

    @functools.cached_property
    def trace(self):
        return self._trace_fn()

    def at(self, point: str):
        """The packets seen at ``point`` (ValueError lists the report's points); with ``point_fn``
        (the engine keeps one trace per point) without building ``trace``."""
        if point not in self.points:
            raise ValueError(f"report {self.report!r} has no capture point {point!r}; "
                             f"its points are {', '.join(self.points)}")
        if self._point_fn is not None and "trace" not in self.__dict__:
            return self._point_fn(point)
        return self.trace.at(point)


def labelled(t: Trace, points: tuple[str, ...], point: str, meta: dict | None = None) -> Trace:
    """``t`` (one capture point's packets) as ``Trace.at(point)`` of a trace with ``points`` returns it."""
    cols = dict(t.columns)
    cols["point"] = np.full(len(t), points.index(point), dtype=cols["point"].dtype)
    return Trace(cols, points, dict(t.meta if meta is None else meta))

    def __repr__(self) -> str:
        return (f"<PresetRun {self.report}/{self.variant}: {self.goodput_bps / 1e6:.4g} Mb/s goodput, "
                f"points {', '.join(self.points)}>")


# ------------------------------------------------------------------ fitting
def solve_linear(f: Callable[[float], float], target: float, a: float = 0.0, b: float = 1.0) -> float:
    """The p with f(p) = target, for f linear in p (two evaluations, checked by a third)."""
    fa, fb = f(a), f(b)
    if fb == fa:
        raise ValueError("cannot fit: the quantity does not depend on the parameter")
    p = a + (target - fa) * (b - a) / (fb - fa)
    got = f(p)
    if abs(got - target) > 1e-6 * max(1.0, abs(target)):
        raise ValueError(f"the fit is not linear: f({p:.6g}) = {got:.6g}, wanted {target:.6g}")
    return p


def bisect(f: Callable[[float], float], target: float, lo: float, hi: float, rel: float = 1e-4,
           max_iter: int = 60) -> float:
    """The p in [lo, hi] where a monotonic f crosses ``target`` (deterministic bisection)."""
    flo, fhi = f(lo), f(hi)
    if (flo - target) * (fhi - target) > 0:
        raise ValueError(f"cannot fit: f({lo:.6g}) = {flo:.6g} and f({hi:.6g}) = {fhi:.6g} "
                         f"are on the same side of {target:.6g}")
    inc = fhi > flo
    for _ in range(max_iter):
        mid = (lo + hi) / 2
        fm = f(mid)
        if abs(fm - target) <= rel * abs(target):
            return mid
        if (fm < target) == inc:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def fit_rate(goodput: Callable[[float], float], target: float, start: float, rel: float,
             what: str, unit: str = "") -> float:
    """The link rate at which ``goodput(rate)`` equals ``target``: fixed-point iteration
    ``rate *= target / goodput(rate)`` (goodput is close to proportional to the rate)."""
    rate = start
    for _ in range(20):
        got = goodput(rate)
        if abs(got - target) <= rel * target:
            return rate
        rate *= target / got
    raise ValueError(f"the {what} fit did not converge ({got:.4g} vs {target:.4g}{unit})")


# ------------------------------------------------------------------ report-independent access
def variants(report_id: str) -> dict[str, Variant]:
    return dict(get(report_id).VARIANTS)


def points(report_id: str) -> tuple[str, ...]:
    return tuple(get(report_id).POINTS)


def run_variant(report_id: str, variant: str = "broken", **overrides) -> PresetRun:
    return get(report_id).run(variant, **overrides)


def reproduce_all(report_ids=None) -> list[Reproduction]:
    """``reproduce()`` of each report (all five by default), in ``REPORT_IDS`` order."""
    ids = REPORT_IDS if report_ids is None else tuple(report_ids)
    return [get(r).reproduce() for r in ids]
