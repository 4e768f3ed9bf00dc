"""The five netdev reports: their facts (loaded from data/, with sources) and, in
``offloadkit/reports/<id>.py`` (``vlan-nat`` -> ``vlan_nat.py``), the scenario
presets whose ``reproduce()`` returns a ``Reproduction`` table."""
from __future__ import annotations

import importlib

from .facts import (REPORT_IDS, Fact, ReportFacts, Target, check_provenance, load_calibration,
                    load_facts)
from .table import Reproduction, Row, Tolerance

__all__ = ["REPORT_IDS", "Fact", "ReportFacts", "Target", "Reproduction", "Row", "Tolerance",
           "load_facts", "load_calibration", "check_provenance", "get", "reproduce"]


def get(report_id: str):
    """The preset module of a report (``vlan-nat`` -> ``offloadkit.reports.vlan_nat``): ``VARIANTS``,
    ``POINTS``, ``KNOBS``, ``run(variant, **knobs)``, ``reproduce()``, ``calibrate()``
    (see ``offloadkit.reports.presets``)."""
    if report_id not in REPORT_IDS:
        raise ValueError(f"unknown report {report_id!r}; the reports are {', '.join(REPORT_IDS)}.")
    return importlib.import_module(f"{__name__}.{report_id.replace('-', '_')}")


def reproduce(report_ids=None) -> dict[str, Reproduction]:
    """Each report's table of report vs model (``get(id).reproduce()``), by id; all five by default."""
    ids = tuple(dict.fromkeys(report_ids)) if report_ids else REPORT_IDS
    return {rid: get(rid).reproduce() for rid in ids}
