"""Damaged copies of a capture's bytes, the same for every reader test that wants them."""
from __future__ import annotations

import numpy as np


def cut_or_flip(raw: bytes, seed: int) -> bytes:
    """Odd seeds cut ``raw`` at a random point; even seeds overwrite three random bytes."""
    out = bytearray(raw)
    rng = np.random.default_rng(seed)
    if seed % 2:
        return bytes(out[:int(rng.integers(0, len(out)))])
    for at in rng.integers(0, len(out), size=3):
        out[at] = int(rng.integers(0, 256))
    return bytes(out)
