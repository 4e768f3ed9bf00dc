"""The original transmissions still unacknowledged, for the black-hole check.

Kept as one block per chunk (each sorted by group, then sequence offset: a group's
originals start ever higher), so adding a chunk costs its own originals only. An
original leaves when its first resend has been seen, when the peer acknowledged it, or
when it lies more than the largest TCP window (2**30 bytes) below the highest byte its
group sent: no resend can reach it then.
"""
from __future__ import annotations

import numpy as np

BIG = np.iinfo(np.int64).max
REL_BITS = 40                  # key = group << REL_BITS | sequence offset
REL_MASK = (1 << REL_BITS) - 1
MAX_WINDOW = 1 << 30           # TCP's largest window (scale 14)
LIMIT = 1 << 21                # originals kept at most (the oldest blocks go first)
FIELDS = ("key", "end", "plen", "frame", "seq", "L", "hdr")


class Originals:
    """Blocks of originals: ``FIELDS`` arrays plus ``sackmin`` (earliest SACK edge inside) and ``resent``."""

    def __init__(self):
        self.blocks: list[dict] = []
        self.check_at = 1 << 16        # prune when this many are kept (twice what the last pruning left)

    def __len__(self) -> int:
        return sum(len(b["key"]) for b in self.blocks)

    def add(self, block: dict) -> None:
        if len(block["key"]):
            block["sackmin"] = np.full(len(block["key"]), BIG, np.int64)
            block["resent"] = np.zeros(len(block["key"]), bool)
            self.blocks.append(block)

    def sacked(self, key: np.ndarray, time: np.ndarray) -> None:
        """SACK left edges (group << REL_BITS | offset) at ``time``: marked on the original each starts inside."""
        for b in self.blocks:
            j = np.searchsorted(b["key"], key, side="left") - 1     # the original starting below the edge
            hit = j >= 0
            j = np.maximum(j, 0)
            hit &= ((b["key"][j] >> REL_BITS) == (key >> REL_BITS)) & ((key & REL_MASK) < b["end"][j])
            np.minimum.at(b["sackmin"], j[hit], time[hit])

    def first_resends(self, key: np.ndarray) -> tuple[np.ndarray, dict]:
        """For resends starting at ``key`` (one per key): which are the first resend of a stored
        original (marked resent now), and those originals' fields."""
        found = np.zeros(len(key), bool)
        parts = []
        for b in self.blocks:
            j = np.minimum(np.searchsorted(b["key"], key), len(b["key"]) - 1)
            hit = (b["key"][j] == key) & ~b["resent"][j] & ~found
            if hit.any():
                b["resent"][j[hit]] = True
                found |= hit
                parts.append((np.flatnonzero(hit), {k: b[k][j[hit]] for k in (*FIELDS, "sackmin")}))
        fields = {k: np.zeros(len(key), np.int64) for k in (*FIELDS, "sackmin")}
        for idx, f in parts:
            for k, v in f.items():
                fields[k][idx] = v
        return found, {k: v[found] for k, v in fields.items()}

    def prune(self, acked: np.ndarray, top: np.ndarray) -> None:
        """Forget originals resent, ending at or below ``acked[group]`` or ``top[group] - MAX_WINDOW``
        (looked at when the store has doubled since the last time: a constant cost per original)."""
        if len(self) < self.check_at:
            return
        keep_blocks = []
        for b in self.blocks:
            g = b["key"] >> REL_BITS
            keep = ~b["resent"] & (b["end"] > acked[g]) & (b["end"] > top[g] - MAX_WINDOW)
            if keep.all():
                keep_blocks.append(b)
            elif keep.any():
                keep_blocks.append({k: v[keep] for k, v in b.items()})
        while sum(len(b["key"]) for b in keep_blocks) > LIMIT:
            keep_blocks.pop(0)
        self.blocks = keep_blocks
        self.check_at = max(2 * len(self), 1 << 16)
