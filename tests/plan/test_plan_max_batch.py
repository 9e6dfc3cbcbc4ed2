"""plan and `profile --max-batch-search`: the searched batch replaces the projection on the
profiled card only; profiles written before the field still load."""

from __future__ import annotations

import json

from ttsperf.plan.api import make_plan
from ttsperf.plan.cards import build_cards
from ttsperf.plan.catalog import load_catalog
from ttsperf.plan.memory import Workload
from ttsperf.profile.schema import MaxBatchPoint, load_profile


def test_a_version_1_profile_still_loads(tmp_path, make_profile):
    d = make_profile().dump()
    d["version"] = 1
    d.pop("max_batch")
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(d))
    assert load_profile(path).max_batch == []


def _searched(context, batch, limit="oom"):
    return MaxBatchPoint(context=context, max_batch=batch, limit=limit, method="test", probes=[(batch, True)])


def test_plan_uses_the_searched_max_batch_on_the_profiled_card_only(make_profile):
    prof = make_profile(device="NVIDIA GeForce RTX 4090")
    w = Workload(audio_seconds=8.0, prompt_tokens=64)  # serve reserves 96 + 480 = 576 tokens a slot
    assert w.kv_tokens == 576
    prof.max_batch = [_searched(576, 300), _searched(2048, 60)]
    catalog = load_catalog(only=["RTX 4090", "RTX 3090"])
    cards = {c.name: c for c in build_cards(catalog, [("p.json", prof)], "fp16")}
    batch, basis = cards["RTX 4090"].max_batch(w)
    assert (batch, basis.kind) == (300, "measured") and "p.json" in basis.how
    assert cards["RTX 3090"].max_batch(w)[1].kind == "projected"  # another card: the memory model

    prof.max_batch = [_searched(512, 300)]  # searched at another context: scaled by KV per row
    card = build_cards(load_catalog(only=["RTX 4090"]), [("p.json", prof)], "fp16")[0]
    batch, basis = card.max_batch(w)
    assert batch == int(300 * 513 / 577) and basis.kind == "projected" and "scaled" in basis.how
    assert card.max_batch(w, cap=64)[0] == 64

    prof.max_batch = [_searched(512, 4096, limit="cap")]  # only a lower bound: the projection stands
    card = build_cards(load_catalog(only=["RTX 4090"]), [("p.json", prof)], "fp16")[0]
    assert card.max_batch(w) == (card.memory.max_batch(card.memory_bytes, w), card.max_batch(w)[1])
    assert "cap" in card.max_batch(w)[1].how


def test_plan_json_row_carries_the_searched_batch_and_its_basis(tmp_path, make_profile):
    prof = make_profile(device="NVIDIA GeForce RTX 4090")
    prof.max_batch = [_searched(576, 300)]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof.dump()))
    plan = make_plan(profile=[str(path)], gpus="RTX 4090,RTX 3090", scenario="offline", requests=100,
                     audio_seconds=8.0)  # fmt: skip  # serve's 96 + 480-token slots, as the profile searched
    rows = {r.gpu: r for r in plan.scenarios[0].rows}
    assert rows["RTX 4090"].max_batch == 300 and rows["RTX 4090"].basis["max_batch"].kind == "measured"
    assert rows["RTX 3090"].basis["max_batch"].kind == "projected"
