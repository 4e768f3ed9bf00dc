"""offloadkit.exercises: every key is the library's answer, every wrong answer gets a hint."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from offloadkit import exercises as X

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("eid", X.ids())
def test_own_answer_is_correct_and_a_wrong_one_is_not(eid):
    a = X.answer(eid)
    assert X.check(eid, a).correct, X.check(eid, a).message
    for wrong in (a * 1.5 + 7, a * 0.5 - 7):
        fb = X.check(eid, wrong)
        assert not fb.correct
        assert "Hint:" in fb.message and X.get(eid).hint in fb.message


def test_tolerance_accepts_a_reading_off_the_readout():
    e = X.get("05-gro-off-rate")
    a = X.answer(e.id)
    assert X.check(e.id, round(a * (1 + e.rel / 2))).correct


def test_not_a_number_is_wrong_with_a_hint():
    fb = X.check("00-wire-frames", "forty-five")
    assert not fb.correct and "give a number in frames" in fb.message


def test_unknown_id_names_the_ids():
    with pytest.raises(ValueError, match="00-wire-frames"):
        X.check("99-nope", 1)


def test_answers_follow_the_model():
    from offloadkit.sim.one_packet import one_packet
    assert X.answer("00-wire-frames") == len(one_packet(payload=64000).sizes("wire"))


@pytest.mark.parametrize("notebook", sorted(X.NOTEBOOKS.values()))
def test_every_notebook_checks_at_least_two_exercises(notebook):
    nb = json.loads((NOTEBOOKS / notebook).read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    used = [eid for eid in X.ids(notebook[:2]) if f'check("{eid}"' in code]
    assert code.count("check(") >= 2 and len(used) >= 2, (notebook, used)
    assert len(X.ids(notebook[:2])) >= 2
