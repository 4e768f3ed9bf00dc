"""The reports' numbers, settings, tcpdump excerpts and targets, loaded from data/.

Every fact names where it comes from: a seed file in ``shared/seeds/`` and a
line number, with the quoted text (``kind`` 'measured' or 'config'), or an
expression over other facts and over the stored excerpts' timestamps
(``kind`` 'derived', evaluated here at load time). See ``data/README.md``.

    >>> f = load_facts("rtl8139")
    >>> f.fact("throughput_tso_off_kBps").value
    723
    >>> round(f.fact("rtt_guest_ms").value, 3)
    29.409
"""
from __future__ import annotations

import ast
import difflib
import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..resources import data_dir
from .table import Tolerance, within

REPORT_IDS = ("rtl8139", "mpls", "vxlan", "splice", "vlan-nat")
KINDS = ("measured", "derived", "config")
NOTES_FILE = "reports.md"  # the notes beside the seeds (shared/reports.md)


@dataclass(frozen=True)
class Fact:
    """One number or setting with its source.

    ``source_file``/``source_line``/``quote``: where it is written (a seed file,
    or ``reports.md`` for the notes); the quote is on that line verbatim.
    Derived facts carry ``expr`` and ``inputs`` (fact names and ``file:line``
    of the excerpt lines they read); their source fields, if set, cite where the
    notes state the same number (``stated``).
    """

    name: str
    value: object
    unit: str
    source_file: str | None
    source_line: int | None
    quote: str
    kind: str
    expr: str | None = None
    inputs: tuple[str, ...] = ()
    stated: float | None = None
    status: str | None = None  # calibration constants: 'F' found in a source, 'I' inferred
    note: str = ""

    @property
    def ref(self) -> str:
        """Short citation: ``file:line``, or ``derived: expr``."""
        if self.kind == "derived":
            return f"derived: {self.expr}"
        return f"{self.source_file}:{self.source_line}"


@dataclass(frozen=True)
class Target:
    """One of issue 6's targets: a reported value (or (lo, hi) range) from facts, and a tolerance."""

    quantity: str
    unit: str
    reported: object
    tolerance: Tolerance
    facts: tuple[str, ...]
    source: str
    issue: str
    tolerance_from: str

    def check(self, model) -> bool:
        return within(self.reported, model, self.tolerance)


@dataclass(frozen=True)
class ReportFacts:
    """Everything data/ says about one report. Look facts up with ``fact(name)``."""

    id: str
    seed: str
    title: str
    numbers: Mapping[str, Fact]
    config: Mapping[str, Fact]
    excerpts: Mapping[str, tuple[str, ...]]
    excerpt_lines: Mapping[str, tuple[int, ...]]  # seed line number of each excerpt line
    targets: Mapping[str, Target]
    meta: Mapping[str, object] = field(default_factory=dict)  # title, author, date, seed_text, excerpt info

    def fact(self, name: str) -> Fact:
        """A number or a config fact by name; KeyError lists what is available."""
        if name in self.numbers:
            return self.numbers[name]
        if name in self.config:
            return self.config[name]
        names = sorted(set(self.numbers) | set(self.config))
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"report {self.id!r} has no fact {name!r}.{hint} Available: {', '.join(names)}")

    def value(self, name: str):
        return self.fact(name).value

    def group(self, prefix: str) -> dict[str, Fact]:
        """Facts whose names start with ``prefix`` (e.g. ``"samples.above."``), keyed by the rest, in data order."""
        return {n[len(prefix):]: f for n, f in self.numbers.items() if n.startswith(prefix)}

    def table(self, names) -> str:
        """The facts ``names`` as text lines: name, value, unit and where it is written
        (seed file:line) or how it is derived; what the report notebooks print first."""
        out = []
        for name in names:
            f = self.fact(name)
            value = f"{f.value:.4g}" if isinstance(f.value, float) else str(f.value)
            out.append(f"{name:34s} {value:>10s} {f.unit:8s} {f.ref}")
        return "\n".join(out)


# ---------------------------------------------------------------- expressions

_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})\.(\d{6}) ")
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b}


class _Expr:
    """Evaluates a derived fact's expression: + - * / **, numbers, fact names, and
    ``f('name')`` (any fact name), ``total('prefix')`` (sum of facts with that prefix),
    ``t('excerpt', seed_line)`` (that excerpt line's timestamp in integer microseconds)."""

    def __init__(self, report: str, values: dict, excerpts: dict, lines: dict, seed: str):
        self.report, self.values, self.excerpts, self.lines, self.seed = report, values, excerpts, lines, seed
        self.inputs: list[str] = []

    def run(self, name: str, expr: str):
        self.inputs = []
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError as e:
            raise ValueError(f"{self.report}: derived fact {name!r} has a bad expression {expr!r}: {e.msg}") from None
        return self._eval(tree.body, name), tuple(dict.fromkeys(self.inputs))

    def _fact(self, fname: str, name: str):
        if fname not in self.values:
            raise ValueError(f"{self.report}: derived fact {name!r} uses {fname!r}, which is not defined before it")
        self.inputs.append(fname)
        return self.values[fname]

    def _eval(self, node, name):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            return self._fact(node.id, name)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](self._eval(node.left, name), self._eval(node.right, name))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self._eval(node.operand, name)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords
                and all(isinstance(a, ast.Constant) for a in node.args)):
            args = [a.value for a in node.args]
            fn = node.func.id
            if fn == "f" and len(args) == 1:
                return self._fact(args[0], name)
            if fn == "total" and len(args) == 1:
                picked = [k for k in self.values if k.startswith(args[0])]
                if not picked:
                    raise ValueError(f"{self.report}: {name!r}: no facts start with {args[0]!r}")
                return sum(self._fact(k, name) for k in picked)
            if fn == "t" and len(args) == 2:
                return self._time_us(*args, name)
        raise ValueError(f"{self.report}: derived fact {name!r}: unsupported expression "
                         f"{ast.unparse(node)!r} (use + - * / **, fact names, f(), total(), t())")

    def _time_us(self, excerpt: str, seed_line: int, name: str) -> int:
        if excerpt not in self.excerpts:
            raise ValueError(f"{self.report}: {name!r}: no excerpt {excerpt!r} (have {sorted(self.excerpts)})")
        try:
            text = self.excerpts[excerpt][self.lines[excerpt].index(seed_line)]
        except ValueError:
            raise ValueError(f"{self.report}: {name!r}: excerpt {excerpt!r} does not hold seed line {seed_line}") from None
        m = _TIME.match(text)
        if not m:
            raise ValueError(f"{self.report}: {name!r}: seed line {seed_line} has no HH:MM:SS.ffffff timestamp")
        h, mi, s, us = (int(x) for x in m.groups())
        self.inputs.append(f"{self.seed}:{seed_line}")
        return ((h * 60 + mi) * 60 + s) * 1_000_000 + us


# ---------------------------------------------------------------- loading

def _fact_from(d: dict, where: str) -> Fact:
    missing = [k for k in ("name", "unit", "kind") if k not in d]
    if missing:
        raise ValueError(f"{where}: fact {d.get('name', '?')!r} lacks {', '.join(missing)}")
    if d["kind"] not in KINDS:
        raise ValueError(f"{where}: fact {d['name']!r} has kind {d['kind']!r}; use one of {', '.join(KINDS)}")
    if d["kind"] != "derived":
        for k in ("value", "source_file", "source_line", "quote"):
            if k not in d:
                raise ValueError(f"{where}: fact {d['name']!r} lacks {k!r}")
    return Fact(name=d["name"], value=d.get("value"), unit=d["unit"], source_file=d.get("source_file"),
                source_line=d.get("source_line"), quote=d.get("quote", ""), kind=d["kind"],
                expr=d.get("expr"), stated=d.get("stated"), status=d.get("status"), note=d.get("note", ""))


def _read_excerpts(doc: dict, folder: Path, where: str):
    texts, lines = {}, {}
    for name, e in doc.get("excerpts", {}).items():
        text = (folder / e["file"]).read_text(encoding="utf-8").splitlines()
        seed_lines = [n for a, b in e["seed_lines"] for n in range(a, b + 1)]
        if len(text) != len(seed_lines):
            raise ValueError(f"{where}: excerpt {name!r} ({e['file']}) has {len(text)} lines "
                             f"but seed_lines cover {len(seed_lines)}")
        texts[name], lines[name] = tuple(text), tuple(seed_lines)
    return texts, lines


def _resolve_target(t: dict, facts: dict, where: str) -> Target:
    def one(x):
        if x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)):
            return x, None
        if x not in facts:
            raise ValueError(f"{where}: target {t['quantity']!r} cites unknown fact {x!r}")
        return facts[x].value, x

    if isinstance(t["reported"], list):
        (lo, a), (hi, b) = one(t["reported"][0]), one(t["reported"][1])
        reported, names = (lo, hi), tuple(n for n in (a, b) if n)
    else:
        value, n = one(t["reported"])
        reported, names = value, (n,) if n else ()
    for n in names:
        if facts[n].unit != t["unit"]:
            raise ValueError(f"{where}: target {t['quantity']!r} is in {t['unit']!r} but fact {n!r} is in {facts[n].unit!r}")
    source = "; ".join(dict.fromkeys(facts[n].ref for n in names)) or "issue 6"
    if isinstance(t["reported"], list) and len(names) < 2:
        source += "; issue 6 (literal bound)"
    return Target(quantity=t["quantity"], unit=t["unit"], reported=reported,
                  tolerance=Tolerance.from_json(t["tolerance"]), facts=names, source=source,
                  issue=t.get("issue", ""), tolerance_from=t.get("tolerance_from", "issue 6"))


@functools.lru_cache(maxsize=None)
def _load(report_id: str, folder: str) -> ReportFacts:
    path = Path(folder) / "reports" / f"{report_id}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: use a checkout of offloadkit (data/ beside the package) "
                                "or set OFFLOADKIT_DATA to its data folder")
    where = str(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("id") != report_id:
        raise ValueError(f"{where}: id is {doc.get('id')!r}, expected {report_id!r}")
    texts, lines = _read_excerpts(doc, path.parent, where)

    config = {}
    for d in doc.get("config", []):
        f = _fact_from(d, where)
        config[f.name] = f
    numbers: dict[str, Fact] = {}
    values: dict[str, object] = {}
    ev = _Expr(report_id, values, texts, lines, doc["seed"])
    for d in doc.get("numbers", []):
        f = _fact_from(d, where)
        if f.name in numbers or f.name in config:
            raise ValueError(f"{where}: fact {f.name!r} is defined twice")
        if f.kind == "derived":
            if not f.expr:
                raise ValueError(f"{where}: derived fact {f.name!r} has no 'expr'")
            value, inputs = ev.run(f.name, f.expr)
            f = Fact(**{**f.__dict__, "value": value, "inputs": inputs,
                        "source_file": f.source_file or doc["seed"]})
        numbers[f.name] = f
        values[f.name] = f.value
    all_config = dict(config)
    all_config.update({n: f for n, f in numbers.items() if f.kind == "config"})

    facts = {**config, **numbers}
    targets = {}
    for t in doc.get("targets", []):
        target = _resolve_target(t, facts, where)
        if target.quantity in targets:
            raise ValueError(f"{where}: target {target.quantity!r} is listed twice")
        targets[target.quantity] = target

    meta = {k: v for k, v in doc.items() if k not in ("config", "numbers", "excerpts", "targets")}
    meta["excerpts"] = doc.get("excerpts", {})
    return ReportFacts(
        id=report_id, seed=doc["seed"], title=doc.get("title", ""), numbers=MappingProxyType(numbers), config=MappingProxyType(all_config),
        excerpts=MappingProxyType(texts), excerpt_lines=MappingProxyType(lines),
        targets=MappingProxyType(targets), meta=MappingProxyType(meta))


def load_facts(report_id: str) -> ReportFacts:
    """The facts of one report: ``rtl8139``, ``mpls``, ``vxlan``, ``splice`` or ``vlan-nat``."""
    if report_id not in REPORT_IDS:
        raise ValueError(f"unknown report {report_id!r}; the reports are {', '.join(REPORT_IDS)}")
    return _load(report_id, str(data_dir()))


@functools.lru_cache(maxsize=None)
def _load_calibration(folder: str) -> Mapping[str, Fact]:
    path = Path(folder) / "calibration.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for row in doc["rows"]:
        for name, v in row["values"].items():
            if name in out:
                raise ValueError(f"{path}: calibration constant {name!r} is defined twice")
            out[name] = Fact(name=name, value=v["value"], unit=v["unit"], source_file=row["source_file"],
                             source_line=row["source_line"], quote=row["quote"], kind="config",
                             status=v.get("status", row["status"]),
                             note=f"{row['quantity']}: {row['text']} (source: {row['source']})")
    return MappingProxyType(out)


def load_calibration() -> Mapping[str, Fact]:
    """Calibration constants from the notes' table (``data/calibration.json``), by name.
    ``status`` is 'F' (found in a cited source) or 'I' (inferred in the notes)."""
    return _load_calibration(str(data_dir()))


# ---------------------------------------------------------------- provenance

def shared_dir() -> Path | None:
    """The folder holding ``seeds/`` and ``reports.md`` beside the checkout, if present."""
    env = os.environ.get("OFFLOADKIT_SHARED")
    p = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    return p if (p / "seeds").is_dir() else None


def _source_lines(shared: Path, name: str, cache: dict) -> list[str] | None:
    if name not in cache:
        p = shared / name if name == NOTES_FILE else shared / "seeds" / name
        cache[name] = p.read_text(encoding="utf-8").splitlines() if p.is_file() else None
    return cache[name]


def _check_fact(f: Fact, shared: Path, cache: dict) -> list[str]:
    if f.source_line is None:
        return []
    lines = _source_lines(shared, f.source_file, cache)
    if lines is None:
        return [f"{f.name}: source file {f.source_file} not found"]
    if not 1 <= f.source_line <= len(lines):
        return [f"{f.name}: {f.source_file} has {len(lines)} lines, not line {f.source_line}"]
    if f.quote not in lines[f.source_line - 1]:
        return [f"{f.name}: {f.source_file}:{f.source_line} does not contain {f.quote!r}"]
    return []


def check_provenance(report_id: str, shared: Path | None = None) -> list[str]:
    """Re-open the seed files (and reports.md) and list every cited line that does not
    hold its quote, and every excerpt line that differs from the seed. Empty = all good."""
    shared = shared or shared_dir()
    if shared is None:
        raise FileNotFoundError("no shared/seeds folder beside the checkout (set OFFLOADKIT_SHARED)")
    rf = load_facts(report_id)
    cache: dict = {}
    problems = []
    for f in list(rf.config.values()) + [f for f in rf.numbers.values() if f.kind != "config"]:
        problems += [f"{report_id}: {p}" for p in _check_fact(f, shared, cache)]
    seed = _source_lines(shared, rf.seed, cache)
    for name, text in rf.excerpts.items():
        for line, n in zip(text, rf.excerpt_lines[name]):
            if seed is None or n > len(seed) or seed[n - 1] != line:
                problems.append(f"{report_id}: excerpt {name!r} line for seed line {n} differs from {rf.seed}")
    return problems


def check_calibration_provenance(shared: Path | None = None) -> list[str]:
    shared = shared or shared_dir()
    if shared is None:
        raise FileNotFoundError("no shared/seeds folder beside the checkout (set OFFLOADKIT_SHARED)")
    cache: dict = {}
    return [f"calibration: {p}" for f in load_calibration().values() for p in _check_fact(f, shared, cache)]
