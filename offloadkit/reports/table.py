"""The reproduction table: each report's numbers next to the model's.

A row compares one quantity: the value the report gives (``reported``), the
model's value (``model``) and a ``Tolerance``. The row says whether the model
value was *fitted* to the report (a calibrated physical parameter) or
*predicted* by it.

Tolerance convention (one rule for every row):

- ``Tolerance.rel(r)``: ok when ``|model - reported| <= r * |reported|``.
- ``Tolerance.abs(a)``: ok when ``|model - reported| <= a``, in the row's unit
  (e.g. ``abs(3)`` on a ``%`` row means 3 percentage points).
- ``Tolerance.exact()`` is ``abs(0)``: equality. It is the only tolerance
  allowed for text and yes/no values (a drop reason, "vhost CPU is higher").
- A reported *range* ``(lo, hi)`` (the report says "70-80 KB/s") is widened
  outward by the tolerance: ok when ``lo - tol(lo) <= model <= hi + tol(hi)``.
  ``None`` for a bound leaves that side open.
- A missing model value (``None`` or NaN) is never ok.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from numbers import Real

ROLES = ("fitted", "predicted")
JSON_KEYS = ("report", "quantity", "unit", "reported", "model", "tolerance", "ok", "role")
_EPS = 1e-9  # relative slack so that 0.1 + 0.2 "exactly" equals 0.3


@dataclass(frozen=True)
class Tolerance:
    """How far a model value may be from the reported one; see the module docstring."""

    kind: str  # "abs" or "rel"
    value: float

    def __post_init__(self):
        if self.kind not in ("abs", "rel"):
            raise ValueError(f"tolerance kind must be 'abs' or 'rel', not {self.kind!r}")
        if not isinstance(self.value, Real) or isinstance(self.value, bool) or not self.value >= 0:
            raise ValueError(f"tolerance must be a number >= 0, not {self.value!r}")

    @classmethod
    def exact(cls) -> "Tolerance":
        return cls("abs", 0)

    @classmethod
    def abs(cls, a: float) -> "Tolerance":
        return cls("abs", a)

    @classmethod
    def rel(cls, r: float) -> "Tolerance":
        return cls("rel", r)

    @classmethod
    def from_json(cls, obj) -> "Tolerance":
        """``{"abs": a}``, ``{"rel": r}`` or the string ``"exact"``."""
        if obj == "exact":
            return cls.exact()
        if isinstance(obj, dict) and len(obj) == 1:
            (kind, value), = obj.items()
            return cls(kind, value)
        raise ValueError(f'tolerance must be {{"abs": a}}, {{"rel": r}} or "exact", not {obj!r}')

    @property
    def is_exact(self) -> bool:
        return self.kind == "abs" and self.value == 0

    def allowance(self, reported: float) -> float:
        """The allowed distance from ``reported``."""
        return self.value if self.kind == "abs" else self.value * abs(reported)

    def to_json(self) -> dict:
        return {self.kind: self.value}

    def text(self, unit: str = "") -> str:
        if self.is_exact:
            return "exact"
        if self.kind == "rel":
            return f"±{_fmt(self.value * 100)}%"
        return f"±{_fmt(self.value)}" + (f" {unit}" if unit and unit != "%" else " pts" if unit == "%" else "")


def _is_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


def _is_range(v) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == 2


def _missing(v) -> bool:
    return v is None or (_is_number(v) and math.isnan(v))


def within(reported, model, tolerance: Tolerance) -> bool:
    """True when ``model`` is within ``tolerance`` of ``reported`` (a value or a (lo, hi) range)."""
    if _missing(model):
        return False
    if _is_range(reported):
        lo, hi = reported
        if not _is_number(model):
            return False
        m = float(model)
        if lo is not None and m < lo - tolerance.allowance(lo) - _EPS * max(1.0, abs(lo)):
            return False
        if hi is not None and m > hi + tolerance.allowance(hi) + _EPS * max(1.0, abs(hi)):
            return False
        return True
    if _is_number(reported):
        if not _is_number(model):
            return False
        slack = tolerance.allowance(reported) + _EPS * max(1.0, abs(reported))
        return abs(float(model) - float(reported)) <= slack
    return model == reported  # text or yes/no: exact only (checked when the row is made)


def _plain(v):
    """A JSON-friendly version of a value (numpy scalars -> Python, NaN -> None, ranges -> lists)."""
    if _is_range(v):
        return [_plain(x) for x in v]
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _fmt(v) -> str:
    if v is None:
        return "-"
    if _is_range(v):
        lo, hi = v
        if lo is None:
            return f"<= {_fmt(hi)}"
        if hi is None:
            return f">= {_fmt(lo)}"
        return f"{_fmt(lo)}-{_fmt(hi)}"
    if isinstance(v, bool) or (hasattr(v, "dtype") and v.dtype == bool):
        return "yes" if v else "no"
    if _is_number(v) or hasattr(v, "item"):
        v = _plain(v)
        if v is None:
            return "nan"
        if isinstance(v, int):
            return str(v)
        return f"{v:.6g}"
    return str(v)


def round_text(v: float, digits: int = 3) -> str:
    """``digits`` significant digits, never an exponent: 30018.2 -> '30000', 72.71 -> '72.7', 0.6585 -> '0.659'."""
    r = float(f"{float(v):.{digits}g}")
    return str(int(round(r))) if abs(r) >= 10 ** (digits - 1) else f"{r:g}"


def format_rate(bps: float) -> str:
    """A rate as a student reads it: 723 kb/s, 2.0 Mb/s, 6.65 Gb/s."""
    if bps >= 1e9:
        return f"{bps / 1e9:.3g} Gb/s"
    if bps >= 1e6:
        return f"{bps / 1e6:.3g} Mb/s"
    if bps >= 1e3:
        return f"{bps / 1e3:.3g} kb/s"
    return f"{bps:.3g} b/s"


def _rounded(v, digits: int) -> str:
    """A cell with numbers rounded to ``digits`` significant digits (ranges, booleans, text as ``_fmt``)."""
    if _is_range(v) and None not in v:
        return f"{_rounded(v[0], digits)}-{_rounded(v[1], digits)}"
    if isinstance(v, bool) or (hasattr(v, "dtype") and v.dtype == bool) or v is None:
        return _fmt(v)
    if _is_number(v) or hasattr(v, "item"):
        v = _plain(v)
        if isinstance(v, float) and v == v:
            return round_text(v, digits)
    return _fmt(v)


@dataclass(frozen=True)
class Row:
    """One compared quantity. ``ok`` is computed from the tolerance."""

    quantity: str
    unit: str
    reported: object
    model: object
    tolerance: Tolerance
    role: str
    source: str = ""

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"row {self.quantity!r}: role must be 'fitted' or 'predicted', not {self.role!r}")
        if not isinstance(self.tolerance, Tolerance):
            raise ValueError(f"row {self.quantity!r}: tolerance must be a Tolerance, not {self.tolerance!r}")
        numeric = _is_number(self.reported) or (
            _is_range(self.reported) and all(x is None or _is_number(x) for x in self.reported)
            and any(x is not None for x in self.reported))
        if not numeric and not self.tolerance.is_exact:
            raise ValueError(f"row {self.quantity!r}: a text or yes/no value ({self.reported!r}) "
                             "needs Tolerance.exact(), not a numeric tolerance")

    @property
    def ok(self) -> bool:
        return within(self.reported, self.model, self.tolerance)

    @property
    def residual(self) -> float | None:
        """model - reported (for a range: the distance outside it, 0 inside); None for text."""
        if _missing(self.model) or not _is_number(self.model):
            return None
        m = float(self.model)
        if _is_range(self.reported):
            lo, hi = self.reported
            if lo is not None and m < lo:
                return m - lo
            if hi is not None and m > hi:
                return m - hi
            return 0.0
        if _is_number(self.reported):
            return m - float(self.reported)
        return None

    @property
    def rel_residual(self) -> float | None:
        """residual / |nearest reported value|; None when it is undefined."""
        r = self.residual
        if r is None:
            return None
        if _is_range(self.reported):
            lo, hi = self.reported
            ref = lo if (lo is not None and float(self.model) < lo) else hi if hi is not None else lo
        else:
            ref = self.reported
        return r / abs(ref) if ref else None

    def to_record(self, report: str) -> dict:
        return {"report": report, "quantity": self.quantity, "unit": self.unit,
                "reported": _plain(self.reported), "model": _plain(self.model),
                "tolerance": self.tolerance.to_json(), "ok": bool(self.ok), "role": self.role}


@dataclass
class Reproduction:
    """A report's table: ``rows`` of report vs model. Build it with ``add`` / ``add_target``."""

    report: str
    rows: list[Row] = field(default_factory=list)

    def add(self, quantity: str, unit: str, reported, model, tolerance: Tolerance,
            role: str, source: str = "") -> Row:
        if any(r.quantity == quantity for r in self.rows):
            raise ValueError(f"{self.report}: quantity {quantity!r} is already in the table")
        row = Row(quantity, unit, reported, model, tolerance, role, source)
        self.rows.append(row)
        return row

    def add_target(self, target, model, role: str) -> Row:
        """Add a row for a ``Target`` from ``load_facts(...).targets`` (reported value, unit,
        tolerance and source all come from data/)."""
        return self.add(target.quantity, target.unit, target.reported, model, target.tolerance,
                        role, target.source)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def all_ok(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    @property
    def fitted(self) -> list[Row]:
        return [r for r in self.rows if r.role == "fitted"]

    @property
    def predicted(self) -> list[Row]:
        return [r for r in self.rows if r.role == "predicted"]

    def to_records(self) -> list[dict]:
        """One dict per row with exactly the keys ``JSON_KEYS`` (JSON-serialisable)."""
        return [r.to_record(self.report) for r in self.rows]

    def to_json(self, indent: int | None = None) -> str:
        """The rows as a JSON list of objects with exactly the keys ``JSON_KEYS``."""
        return json.dumps(self.to_records(), indent=indent, ensure_ascii=False)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame([{
            "report": self.report, "quantity": r.quantity, "unit": r.unit,
            "reported": _plain(r.reported), "model": _plain(r.model),
            "tolerance": r.tolerance.text(r.unit), "residual": r.residual,
            "rel_residual": r.rel_residual, "ok": r.ok, "role": r.role, "source": r.source,
        } for r in self.rows], columns=["report", "quantity", "unit", "reported", "model", "tolerance",
                                        "residual", "rel_residual", "ok", "role", "source"])

    def render(self, source: bool = True, digits: int | None = None) -> str:
        """A plain-text table for the terminal. ``digits``: round the numbers to that many
        significant digits (stable enough for a checked notebook cell)."""
        fmt = _fmt if digits is None else (lambda v: _rounded(v, digits))
        n_ok = sum(r.ok for r in self.rows)
        head = (f"{self.report}: {n_ok}/{len(self.rows)} within tolerance "
                f"({len(self.fitted)} fitted, {len(self.predicted)} predicted)")
        cols = ["quantity", "unit", "reported", "model", "tolerance", "residual", "ok", "role"]
        if source:
            cols.append("source")
        table = [cols]
        for r in self.rows:
            rr = r.rel_residual
            resid = "-" if r.residual is None else (
                f"{rr * 100:+.1f}%" if (r.tolerance.kind == "rel" and rr is not None) else fmt(r.residual))
            cells = [r.quantity, r.unit, fmt(r.reported), fmt(r.model), r.tolerance.text(r.unit),
                     resid, "ok" if r.ok else "FAIL", r.role]
            if source:
                cells.append(r.source)
            table.append(cells)
        widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
        lines = [head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def _repr_html_(self) -> str:
        return self.to_pandas()._repr_html_()
