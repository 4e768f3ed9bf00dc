"""Voila settings for this repository; ``voila`` reads ./voila.py when started from here.

The ``offloadkit`` template (offloadkit/ui/jupyter/voila/templates/offloadkit) is
Voila's ``lab`` template minus the Font Awesome stylesheet it fetches from a CDN,
so ``voila notebooks/00-offloads-101.ipynb`` works offline and asks nothing of
the internet.
"""
import os
from pathlib import Path

_DATA = Path(__file__).resolve().parent / "offloadkit" / "ui" / "jupyter"
if (_DATA / "voila" / "templates" / "offloadkit").is_dir():
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(_DATA), os.environ.get("JUPYTER_PATH", "")) if p)
    c.VoilaConfiguration.template = "offloadkit"  # noqa: F821 (c is traitlets' config object)
