"""The mpls dashboard simulates the start of a run and continues it at its steady rate: the goodput
it shows is the preset's full run's, within 1 % (``ui.report_mpls.live_run``, ``sim.steady``)."""
import pytest

from offloadkit import reports
from offloadkit.ui.report_mpls import PROBES, live_run

MPLS = reports.get("mpls")


@pytest.mark.parametrize("variant,overrides", [("broken", {}), ("mpls_gso_no_inner", {}), ("broken", {"gro": False}),
                                               ("healthy", {}), ("fixed", {}), ("workaround", {"mss": 900})])
def test_live_goodput_is_the_full_runs_within_one_percent(variant, overrides):
    settings = {**MPLS.VARIANTS[variant].settings, **overrides}
    run, goodput, full_s = live_run(settings)
    assert run.result.duration_s < full_s          # a shorter run ...
    assert run.result.duration_s in {p for p, _ in PROBES.values()}
    want = MPLS.run(variant, trace_limit=0, **overrides)
    assert want.result.duration_s == full_s
    assert goodput == pytest.approx(want.goodput_bps, rel=0.01)     # ... the full run's goodput


def test_a_run_that_has_not_settled_is_simulated_in_full():
    run, goodput, full_s = live_run({"mtu": 9000, "mss": 8000})    # over the 1500-byte hop: nothing arrives
    assert goodput == 0 and run.result.duration_s == full_s == 10
