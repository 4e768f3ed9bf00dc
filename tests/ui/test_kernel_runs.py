"""The notebooks' real-kernel sections: repeated runs summarised honestly, stored runs where the lab cannot run."""
from __future__ import annotations

import pytest

from offloadkit.ui import kernel_runs as K


def _run(rate, sizes=None):
    return {"goodput_bps": rate, "retransmits": 0, "kernel": {"rcv": sizes or {"64800": 9, "1440": 2}}, "kit": {}}


def test_rates_compared_only_beyond_their_spread():
    apart = {"A: x": {"runs": [_run(1e9), _run(1.2e9)]}, "B: y": {"runs": [_run(3e9), _run(2.5e9)]}}
    assert "B is faster than A in every run" in K.comparison_text(apart)
    overlap = {"A: x": {"runs": [_run(1e9), _run(5.6e9)]}, "B: y": {"runs": [_run(0.3e9), _run(2e9)]}}
    assert "do not differ beyond the noise" in K.comparison_text(overlap)


def test_experiment_text_shows_median_spread_and_unstable_sizes():
    runs = [_run(1e9), _run(2e9, {"1440": 50}), _run(3e9)]
    text = "\n".join(K.experiment_text("A: x", runs))
    assert "median 2 Gb/s" in text and "spread 1 Gb/s to 3 Gb/s" in text
    assert "differs between runs" in text


@pytest.mark.parametrize("notebook", sorted(K.EXPERIMENTS))
def test_stored_runs_have_provenance_and_repeats(notebook):
    doc = K.stored(notebook)
    assert {"made_by", "kernel", "machine", "date", "repeats"} <= set(doc["provenance"])
    assert set(doc["experiments"]) == set(K.EXPERIMENTS[notebook])
    for label, e in doc["experiments"].items():
        done = [r for r in e["runs"] if "kernel" in r]
        assert len(done) >= 3, label
        assert all(r["kernel"] for r in done)


def test_without_the_lab_the_section_shows_the_stored_runs(monkeypatch):
    monkeypatch.setattr(K, "try_on_kernel", lambda settings, tmp: {"skipped": "needs root"})
    text = K.section_text("00")
    assert text.startswith("The lab cannot run here (needs root)")
    assert "Stored runs instead" in text and "kernel-runs/00.json" in text
    for label in K.EXPERIMENTS["00"]:
        assert label in text
    assert "median" in text and "Skipped" not in text
