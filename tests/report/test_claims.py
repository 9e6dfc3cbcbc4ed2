"""report/claims.py: the guide's claims, only from measured inputs, each quoted from its line."""

from __future__ import annotations

from ttsperf.facts import PARAMS, TOTAL_PARAMS
from ttsperf.report.claims import claims_section
from ttsperf.report.inputs import Inputs, read_inputs

from .blocks import tables as _tables


def test_claims_only_from_measured_inputs_with_the_guides_line(results):
    inputs = read_inputs([results])
    # the tiny model's sizes say nothing about ChatTTS: no size claims, but the bench formula claim
    sec = claims_section(inputs)
    says = [r[0] for r in _tables(sec)[0].rows]
    assert "1.1 B parameters" not in says and "throughput = requests / sum of latencies" in says
    row = next(r for r in _tables(sec)[0].rows if r[0].startswith("throughput"))
    assert row[1].startswith("line 49:") and str(results / "bench" / "run.json") == row[4]


def test_size_claims_for_a_full_size_profile(results):
    inputs = read_inputs([results / "profile.json"])
    path, prof = inputs.profiles[0]
    full = prof.model_copy(deep=True)  # the real ChatTTS counts on the tiny measurement's skeleton
    full.model.config = "chattts"
    full.model.parameters = {**PARAMS, "total": TOTAL_PARAMS}
    full.weights_bytes.value = 4.0 * TOTAL_PARAMS
    full.memory = []
    full.kv_bytes_per_token.value = 122_880.0
    rows = {r[0]: r for r in _tables(claims_section(Inputs(profiles=[(path, full)])))[0].rows}
    assert rows["1.1 B parameters"][2].startswith("279,657,740 parameters (0.28 B)")
    assert "3.9x too high" in rows["1.1 B parameters"][3] and "1.1 B" in rows["1.1 B parameters"][1]
    assert "0.56 GB at 2 B/parameter" in rows["about 2.2 GB of weights in FP16"][2]
    per_s = rows["+80 MB per extra second of audio per batch element"]
    assert per_s[2].startswith("5.76 MB per audio second") and "13.9x too high" in per_s[3]
    assert "67.5%" in rows["the Transformer decoder holds over 70% of the weights"][2]


def test_optimisation_claims_quote_the_guide(results):
    inputs = read_inputs([results / "optimizations.json"])
    rows = _tables(claims_section(inputs))[0].rows
    where = {r[0]: r[1] for r in rows}
    assert where["autocast (AMP) doubles memory"].startswith("line 7:")
    assert where["checkpointing: peak 19 GB -> 12 GB (-37%)"].startswith("line 25:")
    assert not any(r[0].startswith("TF32") for r in rows)  # CUDA only: not measured on this CPU


def test_every_quote_is_the_guides_own_words_on_that_line():
    from pathlib import Path

    from ttsperf.report import claims

    # tests/fixtures/shared/seed holds a copy of the guide (tests/fixtures/README.md)
    guide = Path(__file__).resolve().parents[1] / "fixtures" / "shared" / "seed" / "000_28de64d92baf2491.txt"
    lines = guide.read_text(encoding="utf-8").splitlines()
    quoted = [c for c in vars(claims).values() if isinstance(c, claims.Claim)]
    assert len(quoted) == 10
    for c in quoted:
        for part in c.quote.split(" ... "):
            assert part in lines[c.line - 1], (c.line, part)
