"""Trace: a columnar packet table, one numpy array per field.

Every stage of the engine consumes and produces Traces. A row is one packet
as seen at one capture point; ``points`` names the capture points that the
integer column ``point`` indexes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, MutableMapping

import numpy as np

from .codes import FIN, SYN

MAX_SACK_BLOCKS = 4

# name -> (dtype, default, extra shape). Order is the column order of to_pandas().
FIELDS: dict[str, tuple[str, int, tuple[int, ...]]] = {
    "time_ns": ("int64", 0, ()),
    "point": ("uint8", 0, ()),
    "direction": ("uint8", 0, ()),      # 0: data direction (sender -> receiver), 1: reverse
    "flow": ("int32", 0, ()),
    "frame": ("int64", -1, ()),         # packet number in the source capture (-1: synthetic)
    "ip_version": ("uint8", 4, ()),
    "src_ip": ("uint32", 0, ()),
    "dst_ip": ("uint32", 0, ()),
    "src_ip6": ("uint8", 0, (16,)),
    "dst_ip6": ("uint8", 0, (16,)),
    "sport": ("uint16", 0, ()),
    "dport": ("uint16", 0, ()),
    "seq": ("uint32", 0, ()),
    "ack": ("uint32", 0, ()),
    "payload_len": ("int32", 0, ()),
    "flags": ("uint16", 0, ()),
    "window": ("uint16", 0, ()),
    "urg_ptr": ("uint16", 0, ()),
    "tcp_hlen": ("uint8", 20, ()),      # doff * 4
    "opt_mss": ("uint16", 0, ()),       # 0: absent
    "opt_sackok": ("bool", 0, ()),
    "opt_ts": ("bool", 0, ()),
    "tsval": ("uint32", 0, ()),
    "tsecr": ("uint32", 0, ()),
    "opt_wscale": ("int8", -1, ()),     # -1: absent
    "sack_n": ("uint8", 0, ()),
    "sack": ("uint32", 0, (2 * MAX_SACK_BLOCKS,)),  # left0, right0, left1, right1, ...
    "ip_id": ("uint16", 0, ()),
    "ttl": ("uint8", 64, ()),
    "tos": ("uint8", 0, ()),            # IPv4 TOS / IPv6 traffic class
    "flow_label": ("uint32", 0, ()),    # IPv6 flow label (20 bits)
    "hbh_jumbo": ("bool", 0, ()),       # IPv6 BIG TCP: 8-byte hop-by-hop jumbo header (in ip_hlen), payload length 0
    "df": ("bool", 1, ()),
    "frag": ("uint16", 0, ()),          # MF bit (0x2000) | fragment offset; DF kept in `df`
    "ip_hlen": ("uint8", 20, ()),       # IPv4 header with options / IPv6 header with extension headers
    "ip_len": ("int32", 0, ()),         # IP total length (may exceed 65535 in a model super-packet)
    "ip_csum": ("uint16", 0, ()),
    "l2_bytes": ("int16", 14, ()),      # bytes in front of the IP header (Ethernet + encapsulation)
    "encap": ("uint8", 0, ()),          # codes.ENC_* bits
    "vlan_tci": ("int32", -1, ()),
    "mpls_labels": ("uint8", 0, ()),
    "vni": ("int32", -1, ()),           # VXLAN network identifier, -1: not VXLAN
    "outer_udp_csum": ("int32", -1, ()),  # -1: no outer UDP; else the outer UDP checksum field
    "gso_size": ("int32", 0, ()),
    "gso_segs": ("int32", 0, ()),
    "gso_type": ("uint16", 0, ()),
    "csum_state": ("uint8", 0, ()),     # codes.CSUM_*
    "csum_level": ("uint8", 0, ()),
    "tcp_csum": ("uint16", 0, ()),
    "csum_bad": ("bool", 0, ()),        # the TCP checksum field is deliberately wrong
    "truncated": ("bool", 0, ()),       # captured with a snaplen shorter than the packet
    "drop": ("uint8", 0, ()),           # codes.DROP_*
    "gro_reason": ("uint8", 0, ()),     # codes.GRO_*
}


def _column(name: str, n: int) -> np.ndarray:
    dtype, default, shape = FIELDS[name]
    return np.full((n, *shape), default, dtype=dtype)


def repeat_rows(col: np.ndarray, counts: np.ndarray, total: int) -> np.ndarray:
    """``np.repeat(col, counts, axis=0)`` (``total`` rows, a fresh array) for stages whose output is
    many times their input: a column holding one value is not copied row by row (all zeros costs
    nothing until written: calloc pages; another value is one fill)."""
    if len(col) and (col == col[0]).all():
        if not col[0].any():
            return np.zeros((total, *col.shape[1:]), col.dtype)
        out = np.empty((total, *col.shape[1:]), col.dtype)
        out[...] = col[0]
        return out
    return np.repeat(col, counts, axis=0)


class LazyColumns(MutableMapping):
    """Trace columns some of which are made when first read: ``lazy[name] = (fn, *args)`` gives
    column ``name`` as ``fn(*args)`` on first use (a stage's output shares or gathers the input
    columns it does not change, and a caller that reads few columns pays for few). Iteration
    follows FIELDS order. The arrays ``args`` hold are read when the column is made: do not
    modify them meanwhile. Pickles as a plain dict (every column made)."""

    def __init__(self, have: dict, lazy: dict):
        self.have, self.lazy = have, lazy

    def __getitem__(self, name):
        v = self.have.get(name)
        if v is None:
            fn, *args = self.lazy.pop(name)         # KeyError for a column it has not
            v = self.have[name] = fn(*args)
        return v

    def __setitem__(self, name, value):
        self.lazy.pop(name, None)
        self.have[name] = value

    def __delitem__(self, name):
        if self.lazy.pop(name, None) is None:
            del self.have[name]

    def __contains__(self, name):
        return name in self.have or name in self.lazy

    def __iter__(self):
        yield from (k for k in FIELDS if k in self)
        yield from (k for k in [*self.have, *self.lazy] if k not in FIELDS)

    def copy(self) -> "LazyColumns":
        """Another mapping with the same columns, still lazy (each makes its own on first use)."""
        return LazyColumns(dict(self.have), dict(self.lazy))

    def __len__(self):
        return sum(1 for _ in self)

    def __reduce__(self):
        return dict, (dict(self.items()),)


def _shallow(columns):
    """A copy of a column mapping sharing its arrays (lazy columns stay lazy)."""
    return columns.copy() if isinstance(columns, LazyColumns) else dict(columns)


class ColumnBuffer:
    """Arrays reused from chunk to chunk of a stream: ``get(name, n, dtype, shape)`` is a view of n
    rows of one array kept per name (grown, never shrunk), so a chunk's columns cost no fresh pages.
    A view is valid until the next ``get`` of that name; a name always has the same dtype and shape."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, n: int, dtype, shape: tuple[int, ...] = ()) -> np.ndarray:
        a = self.arrays.get(name)
        if a is None or len(a) < n:
            a = self.arrays[name] = np.empty((max(n, 2 * len(a)) if a is not None else n, *shape), dtype)
        return a[:n]

    def trace(self, n: int) -> "Trace":
        """``Trace.empty(n)`` in this buffer's memory (every column refilled with its default)."""
        cols = {}
        for name, (dtype, default, shape) in FIELDS.items():
            v = self.get(name, n, dtype, shape)
            v.fill(default)
            cols[name] = v
        return Trace(cols)


@dataclass(frozen=True, eq=False)
class Trace:
    """A packet table. Build one with :meth:`from_columns`; columns are attributes."""

    columns: dict[str, np.ndarray]
    points: tuple[str, ...] = ("capture",)
    meta: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, n: int = 0, points: Iterable[str] = ("capture",)) -> "Trace":
        return cls({name: _column(name, n) for name in FIELDS}, tuple(points))

    @classmethod
    def from_columns(cls, points: Iterable[str] = ("capture",), meta: Mapping | None = None,
                     **columns) -> "Trace":
        """Columns not given take their defaults; scalars are broadcast."""
        n = next((len(v) for v in columns.values() if np.ndim(v) > 0), 1)
        cols = {}
        for name in FIELDS:
            col = _column(name, n)
            if name in columns:
                col[...] = columns[name]
            cols[name] = col
        unknown = set(columns) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown trace columns: {sorted(unknown)}")
        return cls(cols, tuple(points), dict(meta or {}))

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping], points: Iterable[str] = ("capture",)) -> "Trace":
        """One row per mapping of column values; a column missing from a row takes its default.

        Keys that are not columns are ignored (decoders keep their own notes in rows)."""
        rows = list(rows)
        if not rows:
            return cls.empty(0, points)
        present = set().union(*rows) & set(FIELDS)
        if not present:
            return cls.empty(len(rows), points)
        cols = {}
        for k in present:
            dtype, default, shape = FIELDS[k]
            dflt = [default] * shape[0] if shape else default
            cols[k] = np.asarray([r.get(k, dflt) for r in rows], dtype=dtype)
        return cls.from_columns(points, **cols)

    def __len__(self) -> int:
        return len(self.columns["time_ns"])

    def __getattr__(self, name: str) -> np.ndarray:
        cols = self.__dict__.get("columns")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    def __getitem__(self, index) -> "Trace":
        """Rows by slice, boolean mask or integer indices; always returns a Trace."""
        if isinstance(index, (int, np.integer)):
            index = slice(index, index + 1 if index != -1 else None)
        elif not isinstance(index, slice):
            index = np.asarray(index)
            if index.dtype == bool:    # one pass over the mask, then a gather per column
                if len(index) != len(self):
                    raise IndexError(f"boolean index of length {len(index)} for a trace of {len(self)} packets")
                index = np.flatnonzero(index)
            elif index.size == 0:
                index = index.astype(np.intp)
            return Trace({k: v.take(index, axis=0) for k, v in self.columns.items()}, self.points, dict(self.meta))
        return Trace({k: v[index] for k, v in self.columns.items()}, self.points, dict(self.meta))

    def replace(self, **columns) -> "Trace":
        """A copy sharing unchanged columns, with the given columns replaced."""
        cols = _shallow(self.columns)
        for k, v in columns.items():
            if k not in FIELDS:
                raise ValueError(f"unknown trace column {k!r}")
            cols[k] = np.asarray(v, dtype=FIELDS[k][0])
        return Trace(cols, self.points, dict(self.meta))

    def copy(self) -> "Trace":
        return Trace({k: v.copy() for k, v in self.columns.items()}, self.points, dict(self.meta))

    # -- capture points -------------------------------------------------
    def point_code(self, name: str) -> int:
        try:
            return self.points.index(name)
        except ValueError:
            raise ValueError(f"no capture point {name!r}; this trace has {list(self.points)}") from None

    def at(self, name: str) -> "Trace":
        """The packets seen at one capture point (views of the columns when that point's rows are
        contiguous, as in a trace ordered by point: treat the result as read-only)."""
        idx = np.flatnonzero(self.columns["point"] == self.point_code(name))
        if len(idx) and int(idx[-1]) - int(idx[0]) + 1 == len(idx):
            return self[int(idx[0]):int(idx[-1]) + 1]
        return self[idx]

    def with_point(self, name: str) -> "Trace":
        """The same packets, all labelled as captured at ``name``."""
        points = self.points if name in self.points else self.points + (name,)
        t = Trace(_shallow(self.columns), points, dict(self.meta))
        return t.replace(point=np.full(len(self), points.index(name)))

    @staticmethod
    def concat(traces: Iterable["Trace"]) -> "Trace":
        """Rows of all traces, in order; capture-point codes are remapped."""
        traces = list(traces)
        if not traces:
            return Trace.empty()
        points: list[str] = []
        for t in traces:
            points += [p for p in t.points if p not in points]
        parts = []
        for t in traces:
            remap = np.array([points.index(p) for p in t.points], dtype="uint8")
            parts.append(t.replace(point=remap[t.columns["point"]]) if len(t) else t)
        cols = {k: np.concatenate([p.columns[k] for p in parts]) for k in FIELDS}
        return Trace(cols, tuple(points), dict(traces[0].meta))

    def sort_by_time(self) -> "Trace":
        return self[np.argsort(self.columns["time_ns"], kind="stable")]

    # -- derived views --------------------------------------------------
    @property
    def seq_end(self) -> np.ndarray:
        """Sequence number after the packet's payload (SYN and FIN count one)."""
        f = self.columns["flags"]
        extra = ((f & SYN) != 0).astype("uint32") + ((f & FIN) != 0).astype("uint32")
        return (self.columns["seq"] + self.columns["payload_len"].astype("uint32") + extra).astype("uint32")

    @property
    def wire_len(self) -> np.ndarray:
        """Frame length on the wire: L2 and encapsulation bytes plus the IP datagram."""
        return self.columns["l2_bytes"].astype("int64") + self.columns["ip_len"]

    def to_pandas(self):
        import pandas as pd
        data = {}
        for name, col in self.columns.items():
            if col.ndim == 1:
                data[name] = col
        df = pd.DataFrame(data)
        df["point"] = pd.Categorical.from_codes(df["point"].astype(int), categories=list(self.points)) \
            if len(df) else pd.Categorical([], categories=list(self.points))
        return df

    def __repr__(self) -> str:
        return f"<Trace {len(self)} packets at {', '.join(self.points)}>"
