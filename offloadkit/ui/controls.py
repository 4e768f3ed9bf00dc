"""The dashboards' controls: one name, one label and one meaning each, on every dashboard.

A control's name is the preset knob (or ``one_packet`` argument) it sets, with the
same meaning; :data:`CONTROLS` is the table the README's "Layout" section lists.
A dashboard adds *where* (which host or link) to the label, never a new meaning.
Sliders recompute on release; the MSS slider's maximum follows the MTU
(``Dashboard(mss_max=...)``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as W
import traitlets

# name -> (label, meaning). Every dashboard control is one of these.
CONTROLS: dict[str, tuple[str, str]] = {
    "mss": ("MSS (payload bytes)", "TCP payload bytes per segment (gso_size), timestamps on: at most MTU - 52"),
    "mtu": ("MTU", "largest IP packet the named link carries"),
    "path_mtu": ("MTU (PPPoE link)", "largest IP packet the PPPoE hop carries; the sender's own MTU stays 1500"),
    "payload": ("payload", "bytes of the one TCP write"),
    "tso": ("TSO", "the sender device segments super-packets (needs TX checksum offload)"),
    "gso": ("GSO", "the sender kernel segments super-packets in software when the device cannot"),
    "gro": ("GRO", "the receiving host's NIC merges segments (napi_gro_receive)"),
    "tx_csum": ("TX checksum offload", "the sender device fills TCP checksums (NETIF_F_HW_CSUM)"),
    "rx_csum": ("RX checksum offload", ("the receiving NIC validates checksums: on/off, or on vxlan which "
                                        "checksum it vouches for (outer UDP only, inner TCP too, none)")),
    "nic": ("NIC", "the sender device's segmentation model"),
    "encap": ("encapsulation", "headers the hop adds inside its MTU"),
    "ip_version": ("IP", "IPv4 (20-byte header) or IPv6 (40-byte header, no IP ID)"),
    "mpls": ("MPLS label on the route", "the route pushes label 100"),
    "segmenter": ("GSO skbs on the labelled route", "dropped (before 4.9), or software GSO (4.9 fix, 48d2ab609b6b)"),
    "drop_reason": ("errno of the GSO drop", "EPROTONOSUPPORT (no mpls_gso module) or EINVAL (mpls_gso loaded)"),
    "outer_udp_csum": ("outer UDP checksum (OVS csum=true)", "the sender fills the VXLAN outer UDP checksum"),
    "sessions": ("sessions", "concurrent TCP flows"),
    "aggregation": ("receive aggregation", "driver LRO (myri10ge), kernel GRO, or none"),
    "allocs_per_rx_skb": ("allocations per received skb", "1: linear_to_page allocates; 0: shared page (Jarek's follow-up)"),
    "conntrack_checksum": ("nf_conntrack_checksum", "conntrack verifies TCP checksums"),
}

_WIDE = {"description_width": "initial"}


def label(name: str, where: str = "") -> str:
    """The control's label, with the host or link it acts on: 'GRO (laptop)'."""
    text = CONTROLS[name][0]
    return f"{text} ({where})" if where else text


def int_slider(description: str, value: int, lo: int, hi: int, step: int = 1) -> W.IntSlider:
    """An integer slider that recomputes on release (``continuous_update=False``)."""
    return W.IntSlider(value=value, min=lo, max=hi, step=step, description=description,
                       continuous_update=False, style=_WIDE, layout=W.Layout(width="330px"))


def toggle(description: str, value: bool) -> W.Checkbox:
    return W.Checkbox(value=value, description=description, indent=False,
                      layout=W.Layout(width="auto", margin="0 12px 0 0"))


def choice(description: str, options, value) -> W.Dropdown:
    return W.Dropdown(options=options, value=value, description=description, style=_WIDE,
                      layout=W.Layout(width="auto"))


def control(name: str, value, lo: int | None = None, hi: int | None = None, *, step: int = 1, where: str = "",
            label_text: str | None = None, options=None, tooltip: str | None = None, **kw) -> W.ValueWidget:
    """The widget of control ``name`` (a :data:`CONTROLS` entry): a toggle for a bool,
    a dropdown with ``options``, else a slider over ``lo..hi`` in ``step`` s."""
    if name not in CONTROLS:
        raise ValueError(f"no control {name!r} in ui.controls.CONTROLS; add it there with its meaning")
    text = label_text or kw.pop("label", None) or label(name, where)
    if options is not None:
        w = choice(text, options, value)
    elif isinstance(value, bool):
        w = toggle(text, value)
    else:
        w = int_slider(text, value, lo, hi, step)
    w.tooltip = tooltip or CONTROLS[name][1]
    return w


def control_values(ctl: W.ValueWidget, n: int = 12) -> list:
    """Values to try on a control (tests, benchmarks): both states of a toggle, every option of a
    dropdown, ``n`` values spread over a slider's range plus a few next to its current value."""
    if isinstance(ctl.value, bool):
        return [not ctl.value, ctl.value]
    if hasattr(ctl, "options") and not hasattr(ctl, "min"):
        return [o[1] if isinstance(o, tuple) else o for o in ctl.options]
    lo, hi, step = ctl.min, ctl.max, getattr(ctl, "step", 1) or 1
    vals = {lo + round((hi - lo) * k / (n - 1) / step) * step for k in range(n)}
    vals |= {ctl.value - step * k for k in (1, 2, 3) if ctl.value - step * k >= lo}
    return sorted(v for v in vals if lo <= v <= hi)


def apply_overrides(controls: Mapping[str, W.ValueWidget], overrides: Mapping[str, Any]) -> None:
    """Set initial control values; a name or value the control cannot take is a ValueError."""
    for name, value in overrides.items():
        if name not in controls:
            raise ValueError(f"no control {name!r}; this dashboard has {sorted(controls)}.")
        ctl = controls[name]
        lo, hi = getattr(ctl, "min", None), getattr(ctl, "max", None)
        if lo is not None and not (lo <= value <= hi):
            raise ValueError(f"{name}={value} is outside the control's range {lo}..{hi}; choose a value in it.")
        try:
            ctl.value = value
        except traitlets.TraitError as e:  # a dropdown value not among the options
            raise ValueError(f"{name}={value!r}: {e}") from None
