"""The fuzz harness's small run (``make fuzz`` runs 10,000 cases per verb): no tracebacks, exits 0 or 2."""
import pytest
from fuzz.harness import VERBS, corpus, fuzz, mutate


def test_corpus_has_committed_and_generated_captures():
    names = corpus()
    assert any(n.startswith("offloadkit/data/captures/") for n in names)
    assert {"generated/mixed", "generated/fcs", "generated/old", "generated/late"} <= set(names)


def test_mutations_change_the_bytes():
    import random
    rng = random.Random(3)
    seed = corpus()["tests/data/eth_small.pcap"]
    assert sum(mutate(seed, rng) != seed for _ in range(50)) >= 45


@pytest.mark.parametrize("verb", VERBS)
def test_small_fuzz_run_has_no_tracebacks(verb):
    rep = fuzz([verb], 25 if verb != "export" else 8, seed=7, keep=None, log=lambda *a: None)[verb]
    assert rep["tracebacks"] == 0, rep["examples"]
    assert set(rep["exits"]) <= {"0", "2"} and sum(rep["exits"].values()) == rep["cases"]
