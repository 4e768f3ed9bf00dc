"""Bounded running tallies of the doctor: sparse (group, value) counts and the first packet numbers per group.

Both are updated a chunk at a time with numpy (no Python per packet) and their size
depends on the distinct values seen, not on the packets: a bulk flow of a million
packets has a handful of payload sizes.
"""
from __future__ import annotations

import numpy as np

from .findings import MAX_FRAMES
_LOW = (1 << 32) - 1
PENDING = 1 << 18          # keys gathered before they are merged (one sort for several chunks)


class Counts:
    """How many packets of each group had each value (values clipped to 0..2**32-1)."""

    def __init__(self):
        self._keys = np.zeros(0, np.int64)       # group << 32 | value, sorted
        self._counts = np.zeros(0, np.int64)
        self._pending: list[np.ndarray] = []    # keys added since the last merge
        self._npending = 0

    def add(self, group: np.ndarray, value: np.ndarray) -> None:
        if len(group) == 0:
            return
        self._pending.append((group.astype(np.int64) << 32) | np.clip(value.astype(np.int64), 0, _LOW))
        self._npending += len(group)
        if self._npending >= PENDING:
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        u, c = np.unique(np.concatenate(self._pending), return_counts=True)
        self._pending, self._npending = [], 0
        if len(self._keys):
            u, inv = np.unique(np.concatenate([self._keys, u]), return_inverse=True)
            c = np.bincount(inv.ravel(), np.concatenate([self._counts, c]), minlength=len(u)).astype(np.int64)
        self._keys, self._counts = u, c

    @property
    def keys(self) -> np.ndarray:
        self._merge()
        return self._keys

    @property
    def counts(self) -> np.ndarray:
        self._merge()
        return self._counts

    def remap(self, new_group: np.ndarray) -> None:
        """Renumber the groups (``new_group[old]``)."""
        if len(self.keys):
            g = new_group[self.keys >> 32]
            key = (g.astype(np.int64) << 32) | (self.keys & _LOW)
            order = np.argsort(key, kind="stable")
            self._keys, self._counts = key[order], self._counts[order]

    def merged(self, new_group: np.ndarray) -> "Counts":
        """The counts with groups renumbered by ``new_group[old]``, those meeting summed."""
        out = Counts()
        if len(self.keys):
            key = (new_group[self.keys >> 32].astype(np.int64) << 32) | (self.keys & _LOW)
            out._keys, inv = np.unique(key, return_inverse=True)
            out._counts = np.bincount(inv.ravel(), self.counts, minlength=len(out._keys)).astype(np.int64)
        return out

    def at(self, value: np.ndarray) -> np.ndarray:
        """Per group ``g``: the count of ``value[g]``."""
        want = (np.arange(len(value), dtype=np.int64) << 32) | np.clip(value.astype(np.int64), 0, _LOW)
        if len(self.keys) == 0:
            return np.zeros(len(value), np.int64)
        j = np.minimum(np.searchsorted(self.keys, want), len(self.keys) - 1)
        return np.where(self.keys[j] == want, self.counts[j], 0)

    def group(self) -> np.ndarray:
        return self.keys >> 32

    def value(self) -> np.ndarray:
        return self.keys & _LOW

    def of(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, counts) of group ``g``, values ascending."""
        lo, hi = np.searchsorted(self.keys, [g << 32, (g + 1) << 32])
        return self.keys[lo:hi] & _LOW, self.counts[lo:hi]

    def mode(self, ngroups: int, where=None) -> tuple[np.ndarray, np.ndarray]:
        """(most frequent value, its count) per group, ties: the smaller value; (0, 0) for none.
        where: a mask over the keys to count (e.g. ``self.value() < limit[self.group()]``)."""
        mode = np.zeros(ngroups, np.int64)
        count = np.zeros(ngroups, np.int64)
        g, v, c = self.group(), self.value(), self.counts
        if where is not None:
            g, v, c = g[where], v[where], c[where]
        if len(g) == 0:
            return mode, count
        order = np.lexsort((v, -c, g))
        first = np.ones(len(order), bool)
        first[1:] = g[order][1:] != g[order][:-1]
        pick = order[first]
        mode[g[pick]] = v[pick]
        count[g[pick]] = c[pick]
        return mode, count

    def total(self, ngroups: int, where=None, weight=None) -> np.ndarray:
        """Per group: the packets counted (``where`` keys only), each weighted by ``weight`` per key."""
        w = self.counts if weight is None else self.counts * weight
        if where is not None:
            return np.bincount(self.group()[where], w[where], minlength=ngroups)[:ngroups]
        return np.bincount(self.group(), w, minlength=ngroups)[:ngroups]


class FirstFrames:
    """The first ``MAX_FRAMES`` packet numbers per group of the packets marked, in capture order."""

    def __init__(self):
        self.frames = np.zeros((0, MAX_FRAMES), np.int64)
        self.n = np.zeros(0, np.int64)           # per group: packets marked so far (all of them)

    def grow(self, ngroups: int) -> None:
        if len(self.n) < ngroups:
            more = ngroups - len(self.n)
            self.frames = np.concatenate([self.frames, np.zeros((more, MAX_FRAMES), np.int64)])
            self.n = np.concatenate([self.n, np.zeros(more, np.int64)])

    def add(self, group: np.ndarray, frame: np.ndarray, start: np.ndarray) -> None:
        """Marked packets of a chunk sorted by group (capture order inside); ``start``: each
        one's position of the first marked packet of its group in this chunk."""
        if len(group) == 0:
            return
        rank = self.n[group] + np.arange(len(group)) - start
        keep = rank < MAX_FRAMES
        self.frames[group[keep], rank[keep]] = frame[keep]
        self.n += np.bincount(group, minlength=len(self.n))[:len(self.n)]

    def remap(self, new_group: np.ndarray) -> None:
        """Renumber the groups (``new_group[old]``, one entry per group in use)."""
        G = len(new_group)
        self.grow(G)
        out_f, out_n = np.zeros((G, MAX_FRAMES), np.int64), np.zeros(G, np.int64)
        out_f[new_group] = self.frames[:G]
        out_n[new_group] = self.n[:G]
        self.frames, self.n = out_f, out_n

    def of(self, groups) -> list[int]:
        """The first packet numbers over ``groups`` in that order (at most MAX_FRAMES)."""
        out: list[int] = []
        for g in groups:
            if g < len(self.n):
                out += self.frames[g, :min(int(self.n[g]), MAX_FRAMES)].tolist()
        return out[:MAX_FRAMES]
