"""`ttsperf profile --host`: kernel counting, the host section's schema, its table, the command."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.errors import UserError
from ttsperf.model.config import CHATTTS
from ttsperf.profile import host as H
from ttsperf.profile.kernels import compiled_kernels, count_ops
from ttsperf.profile.schema import HostProfile, default_host_profile, load_host_profile


@torch.inference_mode()  # as the engine runs: composite ops reach the counter whole
def test_views_and_allocations_launch_no_kernel_but_a_copying_reshape_does():
    x = torch.ones(4, 6)
    counted = count_ops(lambda: (x.view(6, 4), x.t().unsqueeze(0), torch.empty(3), x + 1, x.t().reshape(24)))
    assert dict(counted.kernels) == {"add.Tensor": 1, "reshape.default": 1}  # t().reshape copies
    assert counted.ops["view.default"] == 1


def test_compiled_kernels_reads_the_calls_of_inductors_call_function():
    code = """
cpp_fused_add_0 = async_compile.cpp_pybinding(...)
def call(args):
    arg0_1, = args
    buf0 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
    extern_kernels.mm(arg0_1, arg0_1, out=buf0)
    buf1 = reinterpret_tensor(buf0, (16,), (1,), 0)
    cpp_fused_add_0(buf1, arg0_1)
    buf2 = torch.ops.aten._fft_c2r.default(buf1, [1], 2, 16)
    return (buf1, )
def benchmark_compiled_module():
    cpp_fused_add_0(x)
"""
    assert dict(compiled_kernels(code)) == {"mm": 1, "cpp_fused_add_0": 1, "_fft_c2r": 1}


@torch.inference_mode()
def test_chattts_counts_on_meta_are_per_call_and_cover_every_mode():
    r = H.runner(CHATTTS, "meta", max_batch=4)
    decode = H.count_decode(r, 3)
    assert decode.eager > decode.captured_region > decode.compiled_region > 20 * 10  # 20 layers
    assert 0 < decode.outside_graph < 10  # padding writes and the one host copy
    audio = H.count_audio(r, 2)
    # outside the graph, the index's one copy to the device (built in NumPy: no torch op)
    assert audio.eager == audio.captured_region + audio.outside_graph and audio.outside_graph == 1
    point = H.point("audio", 2, (None, None), None, audio)
    assert point.modes["cuda_graphs"].graph_nodes.value == audio.captured_region


def test_a_host_profile_round_trips_and_a_wrong_file_is_one_line(tmp_path):
    prof = default_host_profile()
    assert set(prof.host.parts) == {"decode", "prefill", "audio"}
    assert prof.host.cpu.model and prof.host.cpu.flags
    path = tmp_path / "host.json"
    path.write_text(json.dumps(prof.dump()))
    assert load_host_profile(path) == prof
    path.write_text(json.dumps(prof.dump() | {"schema": "ttsperf.profile"}))
    with pytest.raises(UserError, match="field 'schema': expected 'ttsperf.host-profile'"):
        load_host_profile(path)


def test_the_host_table_fits_80_columns():
    from rich.console import Console

    console = Console(width=80, record=True)
    console.print(H.render_host(default_host_profile().host))
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


@pytest.mark.slow
def test_profile_host_writes_decode_prefill_and_audio_with_seconds_and_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(H, "SIZES", (1, 4))
    monkeypatch.setattr(H, "PREFILL_ROWS", (1, 2))
    out = tmp_path / "host.json"
    result = CliRunner().invoke(app, ["profile", "--host", "--no-host-compile", "--quick", "-o", str(out)])
    assert result.exit_code == 0, result.output
    prof = HostProfile.model_validate(json.loads(out.read_text()))
    for name, part in prof.host.parts.items():
        assert [p.size for p in part.points] == ([1, 2] if name == "prefill" else [1, 4])
        for p in part.points:
            eager = p.modes["eager"]
            assert eager.host_seconds.value > 0 and eager.kernels.value > 0
            graphs = p.modes["cuda_graphs"]
            # every part is captured: no host seconds without CUDA, its graph's nodes and what
            # launches around it (the prefill's first sample and its inputs' copy)
            assert graphs.host_seconds is None and graphs.graph_nodes.value > graphs.kernels.value > 0
            assert graphs.graph_nodes.value + graphs.kernels.value >= eager.kernels.value * 0.9
    assert "decode" in result.output and "wrote" in result.output
