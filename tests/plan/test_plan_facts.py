"""ttsperf/facts.py holds the shapes plan needs; they must equal ttsperf.model.config's.

(plan and bench never import the model package at run time; this test does, to catch drift.)
"""

from __future__ import annotations

from ttsperf import facts as F
from ttsperf.model.config import CHATTTS


def test_shapes_and_rates_match_the_model_config():
    g = CHATTTS.gpt
    assert (F.HIDDEN, F.LAYERS, F.HEADS, F.KV_HEADS, F.INTERMEDIATE) == (
        g.hidden_size,
        g.num_hidden_layers,
        g.num_attention_heads,
        g.num_key_value_heads,
        g.intermediate_size,
    )
    assert (F.CODE_VOCAB, F.CODEBOOKS) == (g.num_audio_tokens, g.num_vq)
    assert F.HEAD_DIM == g.hidden_size // g.num_attention_heads
    for dtype, b in F.BYTES_PER_DTYPE.items():
        assert F.kv_bytes_per_token(dtype) == g.kv_bytes_per_token(b)
    assert F.STEPS_PER_AUDIO_SECOND == CHATTTS.steps_per_second
    assert F.SAMPLE_RATE == CHATTTS.sample_rate


def test_plan_never_imports_a_model_or_torch():
    """docs/ARCHITECTURE.md layering: plan reads profiles and catalogs, never a live model."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ttsperf.plan.api import make_plan\n"
        "make_plan(gpus='T4', scenario='offline', requests=50)\n"
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('ttsperf.model', 'ttsperf.engine'))]"
        "\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
