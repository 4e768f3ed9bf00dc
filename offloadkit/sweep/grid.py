"""A sweep's points: the grid's cross product, each turned into one job.

A job is what one worker runs for one point: a :class:`Scenario` (simulated
with ``offloadkit.sim.simulate``) or a :class:`PresetJob` (a report preset's
``run(variant, **knobs)``). Every job is built and validated here, in the
calling process, so a bad name or value fails before any work is sent out.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import UsageError
from ..reports import presets
from ..reports.facts import REPORT_IDS
from ..sim.scenario import Scenario


@dataclass(frozen=True)
class PresetJob:
    """One run of a report preset: ``offloadkit.reports.<report>.run(variant, **knobs)``."""

    report: str
    variant: str = "broken"
    knobs: Mapping[str, object] = field(default_factory=dict)


def expand_grid(grid: Mapping[str, Sequence]) -> list[dict]:
    """Every combination of the grid's values, the first name varying slowest.

    ``{"mss": [536, 1448], "loss": [0, 0.01]}`` -> 4 points, in that order. Values may be
    any iterable (a range, a numpy array: its scalars become Python numbers).
    """
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("the grid is empty: give at least one parameter and its values, e.g. {'mss': [536, 1448]}")
    axes = {}
    for name, values in grid.items():
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise TypeError(f"grid {name!r}: give a list of values, not {values!r}")
        values = [v.item() if hasattr(v, "item") and hasattr(v, "dtype") else v for v in values]
        if not values:
            raise ValueError(f"grid {name!r} has no values")
        for i, v in enumerate(values):
            if v in values[:i]:
                raise ValueError(f"grid {name!r}: value {v!r} is given twice")
        axes[name] = values
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def scenario_with(sc: Scenario, name: str, value) -> Scenario:
    """``sc`` with one field changed by its dotted path: ``tcp.mss``, ``nic.tso``,
    ``receiver.gro``, ``path.0.mtu`` (hop 0), ``seed``, ``flows`` ...

    ValueError names the path and the fields that exist.
    """
    head, _, rest = name.partition(".")
    if isinstance(sc, tuple):                                  # the path: an index, then a Hop field
        if not head.isdigit() or int(head) >= len(sc) or not rest:
            raise ValueError(f"{name!r}: a hop is named by its index, 0..{len(sc) - 1}, then a field, e.g. 0.mtu")
        i = int(head)
        return sc[:i] + (scenario_with(sc[i], rest, value),) + sc[i + 1:]
    fields = {f.name for f in dataclasses.fields(sc)}
    if head not in fields:
        raise ValueError(f"{type(sc).__name__} has no field {head!r}; its fields are {', '.join(sorted(fields))}")
    if rest:
        return dataclasses.replace(sc, **{head: scenario_with(getattr(sc, head), rest, value)})
    return dataclasses.replace(sc, **{head: value})


def preset_base(base) -> PresetJob | None:
    """``"splice"``, ``"splice/below"``, ``("splice", "below")`` or a PresetJob -> PresetJob; else None."""
    if isinstance(base, PresetJob):
        return base
    if isinstance(base, str):
        report, _, variant = base.partition("/")
        return PresetJob(report, variant or "broken")
    if isinstance(base, tuple) and len(base) == 2 and all(isinstance(b, str) for b in base):
        return PresetJob(*base)
    return None


def job_for(base, point: Mapping[str, object]):
    """The job of one grid point on ``base`` (a Scenario, a preset or a factory); ValueError says what is wrong."""
    preset = preset_base(base)
    if preset is not None:
        if preset.report not in REPORT_IDS:
            raise ValueError(f"unknown report {preset.report!r}; the reports are {', '.join(REPORT_IDS)}")
        mod = presets.get(preset.report)
        knobs = {**preset.knobs, **point}
        presets.settings_for(mod.KNOBS, mod.VARIANTS, preset.variant, knobs)     # validates names and values
        return PresetJob(preset.report, preset.variant, knobs)
    if isinstance(base, Scenario):
        sc = base
        for name, value in point.items():
            sc = scenario_with(sc, name, value)
        return sc
    if callable(base):
        job = base(**point)
        if not isinstance(job, (Scenario, PresetJob)):
            raise TypeError(f"the scenario factory returned a {type(job).__name__}, not a Scenario or PresetJob")
        return job
    raise ValueError(f"a sweep's base is a Scenario, a report preset ('splice' or ('splice', 'below')) or a "
                     f"function of the grid's names returning a Scenario, not {type(base).__name__}")


def plan(base, grid: Mapping[str, Sequence]) -> tuple[list[dict], list]:
    """The grid's points and their jobs; the first bad point raises ValueError naming it."""
    points = expand_grid(grid)
    jobs = []
    for point in points:
        try:
            jobs.append(job_for(base, point))
        except (ValueError, TypeError, UsageError) as e:
            where = ", ".join(f"{k}={v}" for k, v in point.items())
            raise ValueError(f"grid point {where}: {e}") from None
    return points, jobs
