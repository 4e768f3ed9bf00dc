"""Live dashboards for the notebooks: ``dashboard("intro")``, one per report.

Each dashboard is a small module in this package with a ``build(**overrides)``
function returning a :class:`~offloadkit.ui.dashboard.Dashboard`; it joins the
registry below (or calls :func:`register`). Modules are imported on first use,
so a notebook pays only for the dashboard it shows. A report module is about::

    from .controls import control
    from .dashboard import Dashboard
    from . import views

    def build(**overrides):
        controls = {"mss": control("mss", 1440, 88, 1448), "mtu": control("mtu", 1500, 576, 9000),
                    "gro": control("gro", True), "tx_csum": control("tx_csum", True)}
        return Dashboard("Report 000", controls, compute=lambda v: get("000").run("broken", **v),
                         views={"sizes": lambda r: views.segment_sizes(r.trace)},
                         texts={"trace": lambda r: views.excerpt_html(r.lines)},
                         mss_max=lambda v: max_mss(v["mtu"]), overrides=overrides)

Each control has the name of the preset knob it sets, and its label and meaning
from ``controls.CONTROLS``.
``compute`` raises ValueError for settings the model rejects; the dashboard shows
the message. ``tests/test_dashboard.py`` runs the contract on every registered id.
"""
from __future__ import annotations

import importlib

from ._lazy_imports import defer_rfc3987_syntax

defer_rfc3987_syntax()  # before altair: saves 1-3 s of kernel start-up (see _lazy_imports)

from .dashboard import Dashboard  # noqa: E402

__all__ = ["Dashboard", "dashboard", "register", "available"]

# report id -> module defining build(**overrides) -> Dashboard
_REGISTRY: dict[str, str] = {
    "intro": "offloadkit.ui.intro",
    "rtl8139": "offloadkit.ui.report_rtl8139",
    "mpls": "offloadkit.ui.report_mpls",
    "vxlan": "offloadkit.ui.report_vxlan",
    "splice": "offloadkit.ui.report_splice",
    "vlan-nat": "offloadkit.ui.report_vlan_nat",
}


def register(report_id: str, module: str) -> None:
    """Make ``dashboard(report_id)`` call ``build()`` of ``module`` (a dotted name)."""
    _REGISTRY[report_id] = module


def available() -> list[str]:
    """The ids ``dashboard()`` accepts."""
    return list(_REGISTRY)


def dashboard(report_id: str, **overrides) -> Dashboard:
    """The live dashboard for ``report_id`` ("intro", or a report id), its controls
    starting at ``overrides`` (e.g. ``dashboard("intro", mss=1440, mtu=1492)``)."""
    if report_id not in _REGISTRY:
        raise ValueError(f"no dashboard {report_id!r}; available: {', '.join(available())}")
    return importlib.import_module(_REGISTRY[report_id]).build(**overrides)
