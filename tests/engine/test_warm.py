"""Ready means warm: every decode, prefill and audio bucket the max batch can reach is built at start, and
a request afterwards builds nothing. On a CPU through the graphed path without capture (each
bucket's padded step runs eagerly); on a GPU the same keys are CUDA graphs."""

from __future__ import annotations

from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.types import SynthRequest, SynthResult
from ttsperf.model.sampling import SamplingParams


def test_start_builds_every_reachable_bucket_and_a_request_builds_none(tiny_pipe):
    engine = Engine(tiny_pipe, EngineConfig(max_batch=256, graphs_without_capture=True)).start()
    try:
        step, audio = engine.runner.graphed, engine.runner.graphed_audio
        prefill = engine.runner.graphed_prefill
        assert step.batch_sizes == [1, 2, 4, 8, 16, 32, 64, 128, 256]
        assert step.context_sizes == [256, 512, 1024, 2048, 2561]  # 512 + 2048 + the spare position
        tops = sorted({top for _, _, top in step.graphs})
        assert tops[0] == 4 and tops[-1] == tiny_pipe.cfg.gpt.num_audio_tokens  # greedy to every code
        assert len(step.graphs) == 9 * 5 * len(tops)
        assert all(frames <= 2 * steps + 64 for _, _, steps, frames in audio.graphs)
        assert engine.warmed["decode_graphs"] == len(step.graphs)
        assert engine.warmed["audio_graphs"] == len(audio.graphs) > 9
        # up to --prefill-rows (8) rows, prompts up to --max-prompt-tokens (512)
        assert sorted(prefill.graphs) == [(r, p) for r in (1, 2, 4, 8) for p in (32, 64, 128, 256, 512)]
        assert engine.warmed["prefill_graphs"] == 20
        # the joining rows' first codes: every rows bucket at every candidates width
        assert sorted(prefill.first_codes) == [(r, top) for r in (1, 2, 4, 8) for top in tops]
        assert engine.warmed["first_code_graphs"] == 4 * len(tops)
        before = (set(step.graphs), set(prefill.graphs), set(prefill.first_codes), set(audio.graphs))
        requests = [
            SynthRequest("你好，世界。", SamplingParams(seed=1), stream=True),
            SynthRequest("今天天气很好。" * 3, SamplingParams(top_k=1)),
            SynthRequest("hello there", SamplingParams(top_k=500, seed=2), stream=True),
        ]
        handles = [engine.submit(r) for r in requests]
        assert all(isinstance(h.collect(120)[1], SynthResult) for h in handles)
        assert (set(step.graphs), set(prefill.graphs), set(prefill.first_codes), set(audio.graphs)) == before
        assert step.eager_steps == 0 and prefill.eager_calls == 0 and audio.eager_calls == 0
    finally:
        engine.stop(drain=False, timeout=10)
