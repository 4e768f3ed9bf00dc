"""Where the kit's data lives: ``offloadkit/data`` inside the package.

``$OFFLOADKIT_DATA`` overrides it everywhere (a folder laid out like
``offloadkit/data``: reports/, hosts/, captures/, calibration.json).
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def data_dir() -> Path:
    """``$OFFLOADKIT_DATA`` if set, else the package's own ``data/``."""
    env = os.environ.get("OFFLOADKIT_DATA")
    return Path(env) if env else Path(str(resources.files("offloadkit") / "data"))
