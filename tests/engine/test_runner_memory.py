"""The runner sizes the KV slots it allocates: as many rows as fit in half the free memory."""

from __future__ import annotations

import pytest

from ttsperf import facts as F
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.runner import AUTO_BATCH_CAP, auto_max_batch
from ttsperf.errors import UserError


def test_auto_max_batch_is_capped_and_never_zero(tiny_pipe):
    assert auto_max_batch(tiny_pipe, 100, 500, cap=5) == 5
    assert auto_max_batch(tiny_pipe, 100, 500, headroom=1e-12) == 1  # nothing fits: still one row
    assert 1 <= auto_max_batch(tiny_pipe, 100, 500) <= AUTO_BATCH_CAP


def test_auto_max_batch_counts_a_slot_as_serve_and_plan_do(tiny_pipe, monkeypatch):
    """One formula for a slot's bytes (facts.slot_bytes): what auto sizes is what serve's refusal
    and plan's memory model count, so an auto batch always passes serve's own check."""
    import psutil

    g = tiny_pipe.cfg.gpt
    per_slot = F.slot_bytes(100, 500, g.kv_bytes_per_token(4), g.hidden_size)  # tiny runs fp32
    free = 1000 * per_slot + 1  # "available" host memory: room for exactly 1000 slots

    class Memory:
        available = free

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory)
    assert auto_max_batch(tiny_pipe, 100, 500, headroom=1.0, cap=10_000) == 1000
    assert auto_max_batch(tiny_pipe, 100, 500, headroom=0.5, cap=10_000) == 500


def test_an_engine_with_a_memory_share_sizes_auto_to_its_share(tiny_pipe, monkeypatch):
    """serve --engines N: the first engine takes 1/N of auto's headroom (engine/pool.py), so the
    N engines' slots fit where one engine's would."""
    import psutil

    g = tiny_pipe.cfg.gpt
    per_slot = F.slot_bytes(100, 100, g.kv_bytes_per_token(4), g.hidden_size)

    class Memory:
        available = 40 * per_slot + 1  # auto: half of it, 20 rows, under the cap of 64

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory)
    sizes = [
        Engine(
            tiny_pipe, EngineConfig(max_batch=None, max_prompt_tokens=100, max_new_tokens=100, memory_share=s)
        ).max_batch
        for s in (1.0, 0.5, 0.25)
    ]
    assert sizes == [20, 10, 5]


def test_an_engine_without_max_batch_gets_the_runners_size(tiny_pipe):
    engine = Engine(tiny_pipe, EngineConfig(max_batch=None, max_prompt_tokens=100, max_new_tokens=100))
    assert engine.max_batch == engine.runner.max_batch == auto_max_batch(tiny_pipe, 100, 100)
    assert engine.slots.max_batch == engine.max_batch == engine.describe()["effective_max_batch"]


# serve's refusal before it allocates: --max-batch slots of facts.slot_bytes each against the
# device's free memory (engine/config.py check_fits; Engine asks CUDA for the free figure)
GIB = 1024**3
PLAN_3090 = EngineConfig(max_batch=256, max_prompt_tokens=64, max_new_tokens=480)  # plan's RTX 3090 answer


def test_slots_that_fit_the_free_memory_pass_and_none_is_no_check():
    kv16 = F.kv_bytes_per_token("fp16")
    per_slot = F.slot_bytes(64, 480, kv16)
    PLAN_3090.check_fits(256 * per_slot, kv16, F.HIDDEN, "cuda:0")  # exactly enough
    PLAN_3090.check_fits(None, kv16, F.HIDDEN, "cpu")  # a CPU, or memory CUDA cannot report
    EngineConfig(max_batch=None).check_fits(1, kv16, F.HIDDEN, "cuda:0")  # auto sizes to what is free


def test_slots_past_the_free_memory_are_refused_in_one_line_naming_the_flags():
    kv16 = F.kv_bytes_per_token("fp16")
    serve_default = EngineConfig(max_batch=256)  # 512 + 2,048 tokens a slot: the 3090 case
    free = int(22.5 * GIB)  # a 24 GiB card with the weights and the CUDA context loaded
    with pytest.raises(UserError) as exc:
        serve_default.check_fits(free, kv16, F.HIDDEN, "cuda:0")
    per_slot = F.slot_bytes(512, 2048, kv16)
    fits = int(free // per_slot)
    assert str(exc.value) == (
        "--max-batch 256: 256 slots of 2560 tokens (--max-prompt-tokens 512 + --max-new-tokens 2048) "
        f"need {256 * per_slot / GIB:.2f} GiB, 22.50 GiB is free on cuda:0; expected at most {fits}, "
        "or fewer tokens per slot"
    )
    assert 140 <= fits < 256 and "\n" not in str(exc.value)
    PLAN_3090.check_fits(free, kv16, F.HIDDEN, "cuda:0")  # plan's limits for the same card fit


def test_an_engine_refuses_before_the_runner_allocates(tiny_pipe, monkeypatch):
    """On CUDA the free figure is torch's; here it is given, and the tiny model's slots exceed it."""
    import ttsperf.engine.engine as engine_module

    monkeypatch.setattr(engine_module, "free_device_bytes", lambda device: 1_000_000)
    allocated = []
    monkeypatch.setattr(engine_module, "Runner", lambda *a, **kw: allocated.append(1))
    config = EngineConfig(max_batch=64, max_prompt_tokens=100, max_new_tokens=100)
    with pytest.raises(UserError, match=r"^--max-batch 64: 64 slots of 200 tokens .* expected at most \d+,"):
        Engine(tiny_pipe, config)
    assert allocated == []
    monkeypatch.undo()  # a CPU's free figure is None: the engine allocates as before
    assert Engine(tiny_pipe, config).max_batch == 64


def test_the_free_figure_is_cudas_and_none_on_a_cpu():
    import torch

    from ttsperf.engine.engine import free_device_bytes

    assert free_device_bytes(torch.device("cpu")) is None


@pytest.mark.slow
def test_a_refusal_in_the_engine_process_reaches_the_front_as_its_own_line():
    """The engine's process raises serve's refusals (UserError) after loading the model; the front
    says them as they are, not as a crash. A setting the front's check cannot see stands in here
    for the CUDA-only --max-batch refusal: lookahead past the first chunk, refused by the engine."""
    from ttsperf.engine.client import EngineClient
    from ttsperf.engine.wire import CoreSpec
    from ttsperf.model.spec import ModelSpec

    config = EngineConfig(max_batch=2, first_chunk_steps=4, lookahead_steps=4)
    with pytest.raises(UserError) as exc:
        EngineClient(CoreSpec(ModelSpec(synthetic=True, config="tiny"), config)).start(timeout=120)
    assert str(exc.value) == "lookahead_steps 4: expected 0 <= it < first_chunk_steps"


def test_an_out_of_memory_at_start_is_one_line_saying_what_to_lower():
    import torch

    from ttsperf.engine.core import _why

    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB.\nGPU 0 has 23.6 GiB")
    why = _why(oom)
    assert why.startswith("out of memory at start (CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0")
    assert why.endswith("lower --max-batch, or the tokens per slot (--max-prompt-tokens, --max-new-tokens)")
    assert "\n" not in why and _why(ValueError("a\nb")) == "ValueError: a b"
