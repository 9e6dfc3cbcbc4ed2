"""Every serve command plan prints fits the card it names (issue 35 item 1): it names the limits that
size serve's slots (--max-prompt-tokens, --max-new-tokens), and its --max-batch of those slots
passes serve's own check (engine/config.py check_fits) with the card's memory, less the weights and
the CUDA context plan assumes, as the free figure. plan's --memory-at counts the same bytes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf import facts as F
from ttsperf.cli.main import app
from ttsperf.plan.memory import DEFAULT_RUNTIME_BYTES, MemoryModel, card_bytes
from ttsperf.server.settings import ServeSettings

runner = CliRunner()
CARDS = {"RTX 3090": 24, "A10": 24, "H200 SXM": 141}  # catalog memory, GB (read as GiB)


def plan(*args: str):
    return runner.invoke(app, ["plan", *args])


def serve_settings(command: str) -> ServeSettings:
    """The printed `ttsperf serve ...` line as serve's own settings: each `--flag value`, or a switch."""
    words = command.split()
    assert words[:2] == ["ttsperf", "serve"], command
    values, words = {}, words[2:]
    while words:
        flag = words.pop(0)
        assert flag.startswith("--"), command
        name = flag[2:].replace("-", "_")
        values[name] = words.pop(0) if words and not words[0].startswith("--") else True
    return ServeSettings.build(synthetic=True, **values).check()


@pytest.fixture(scope="module")
def answers() -> dict:
    r = plan("--gpus", ",".join(CARDS), "--requests", "200", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_every_printed_serve_command_starts_within_its_cards_memory(answers):
    seen = set()
    for sc in answers["scenarios"]:
        for row in sc["rows"]:
            s = serve_settings(row["settings"]["serve_flags"])
            config = s.engine_config()
            assert (config.max_prompt_tokens, config.max_new_tokens) == (64, 480)  # zh-8s: 51 and 381 + 25%
            assert config.max_batch == row["settings"]["max_batch"]
            # free: the card less what plan assumes the weights and the CUDA context take
            free = card_bytes(CARDS[row["gpu"]]) - MemoryModel(s.dtype).weights_bytes - DEFAULT_RUNTIME_BYTES
            config.check_fits(int(free), F.kv_bytes_per_token(s.dtype), F.HIDDEN, "cuda")
            assert row["memory_bytes"]["total"] <= row["memory_bytes"]["card"]
            seen.add(row["gpu"])
    assert seen == set(CARDS)
    w = answers["inputs"]["workload"]
    assert (w["max_prompt_tokens"], w["max_new_tokens"], w["kv_tokens_per_sequence"]) == (64, 480, 544)


def test_the_printed_batch_on_a_3090_fits_by_plans_memory_check(answers):
    """The issue: plan said --max-batch 256 for an RTX 3090 whose own memory check said it did not fit."""
    realtime = next(sc for sc in answers["scenarios"] if sc["scenario"] == "realtime")
    row = next(r for r in realtime["rows"] if r["gpu"] == "RTX 3090")
    batch = row["settings"]["max_batch"]
    r = plan("--gpus", "RTX 3090", "--scenario", "realtime", "--requests", "200", "--memory-at", str(batch))
    assert r.exit_code == 0, r.output
    line = next(
        ln for ln in r.output.splitlines() if ln.startswith("RTX 3090") and ln.rstrip().endswith("yes")
    )
    assert "24.000" in line
    assert "--max-prompt-tokens 64 --max-new-tokens 480" in " ".join(r.output.replace("\\\n", " ").split())


def test_serve_s_default_slots_do_not_fit_and_plan_sizes_the_batch_to_them():
    """--slot-tokens 2560 (serve's 512 + 2,048 by default): 256 of them do not fit a 3090, as plan
    says, and the answer's command carries the slots its smaller batch was fitted with."""
    r = plan(
        "--gpus", "RTX 3090", "--slot-tokens", "2560", "--memory-at", "256", "--requests", "200", "--json"
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    row = out["scenarios"][0]["rows"][0]
    assert row["memory_bytes"]["total"] > row["memory_bytes"]["card"]  # 256 slots of 2560: no
    s = serve_settings(row["settings"]["serve_flags"])
    config = s.engine_config()
    assert (config.max_prompt_tokens, config.max_new_tokens) == (
        64,
        2496,
    )  # the prompt's limit, the rest audio
    assert config.max_batch == row["settings"]["max_batch"] < 256
    free = card_bytes(24) - MemoryModel("fp16").weights_bytes - DEFAULT_RUNTIME_BYTES
    config.check_fits(int(free), F.kv_bytes_per_token("fp16"), F.HIDDEN, "cuda")


def test_the_limits_can_be_serve_s_own():
    r = plan("--gpus", "RTX 3090", "--scenario", "offline", "--requests", "200", "--json",
             "--max-prompt-tokens", "512", "--max-new-tokens", "2048")  # fmt: skip
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)["scenarios"][0]["rows"][0]
    assert "--max-prompt-tokens 512 --max-new-tokens 2048" in row["settings"]["serve_flags"]
    assert row["max_batch"] == MemoryModel("fp16").max_batch(
        card_bytes(24), _zh8s(max_prompt_tokens=512, max_new_tokens=2048)
    )


def _zh8s(**limits):
    from ttsperf.plan.memory import Workload
    from ttsperf.textsets import lengths

    return Workload.mixed(lengths("zh-8s"), **limits)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-new-tokens", "100"], "--max-new-tokens 100: expected at least the 381 steps of the longest"),
        (["--max-prompt-tokens", "8"], "--max-prompt-tokens 8: expected at least the 51 tokens of the"),
        (["--slot-tokens", "2560", "--max-new-tokens", "2048"],
         "--slot-tokens and --max-new-tokens: give the limits or their sum"),
        (["--max-new-tokens", "40000"], "--max-new-tokens 40000: expected at most 32,768 steps"),
    ],
)  # fmt: skip
def test_limits_that_cannot_hold_the_workload_are_one_line(args, says):
    r = plan("--gpus", "RTX 3090", *args)
    assert r.exit_code == 2, r.output
    assert says in r.output and len(r.output.strip().splitlines()) == 1


def test_plans_3090_command_builds_an_engine_under_the_cards_memory_scaled_to_the_tiny_model(
    answers, tiny_pipe, monkeypatch
):
    """The printed command's engine, for real: the tiny model on this CPU, with the free figure serve
    checks set to the RTX 3090's (less weights and CUDA context) scaled by tiny's slot bytes to
    chattts's. plan's slots start there; serve's default 512 + 2,048 at the same batch do not."""
    from dataclasses import replace

    import ttsperf.engine.engine as engine_module
    from ttsperf.engine.engine import Engine
    from ttsperf.errors import UserError

    realtime = next(sc for sc in answers["scenarios"] if sc["scenario"] == "realtime")
    row = next(r for r in realtime["rows"] if r["gpu"] == "RTX 3090")
    config = serve_settings(row["settings"]["serve_flags"]).engine_config()
    g = tiny_pipe.cfg.gpt
    kv_tiny = g.kv_bytes_per_token(next(tiny_pipe.model.gpt.parameters()).dtype.itemsize)
    limits = (config.max_prompt_tokens, config.max_new_tokens)
    scale = F.slot_bytes(*limits, kv_tiny, g.hidden_size) / F.slot_bytes(
        *limits, F.kv_bytes_per_token("fp16")
    )
    free = (card_bytes(24) - MemoryModel("fp16").weights_bytes - DEFAULT_RUNTIME_BYTES) * scale
    monkeypatch.setattr(engine_module, "free_device_bytes", lambda device: int(free))
    engine = Engine(tiny_pipe, config)
    assert engine.max_batch == engine.slots.max_batch == config.max_batch == 256
    del engine
    default = replace(config, max_prompt_tokens=512, max_new_tokens=2048)
    with pytest.raises(
        UserError, match=r"^--max-batch 256: 256 slots of 2560 tokens .* expected at most 1\d\d,"
    ):
        Engine(tiny_pipe, default)
