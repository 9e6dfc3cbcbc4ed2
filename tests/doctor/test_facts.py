"""Facts collected for real: this machine, a model in this process, the official package's source,
a running ttsperf server's /healthz and a profile file."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from ttsperf.doctor import checks
from ttsperf.doctor.chattts_source import select_device_ignores_others, shared_default_params
from ttsperf.doctor.facts import chattts_package, collect, fetch_healthz, from_model, from_profile
from ttsperf.errors import UserError
from ttsperf.model.config import TINY
from ttsperf.model.weights import build_model

from .conftest import make_facts


def test_collect_on_this_machine_says_what_it_could_not_see():
    facts = collect()
    assert facts.torch_version == torch.__version__
    assert facts.gpu_count == torch.cuda.device_count()
    assert facts.torch_flags["grad_enabled"] is True
    if not torch.cuda.is_available():
        assert facts.gpu_processes is None and facts.gpu_processes_note
        [dep] = facts.deployments
        assert dep.source == "ttsperf serve defaults" and dep.device == "cpu"
        found = {f.id: f for f in checks.run_checks(facts)}
        assert found["cudnn-benchmark"].severity == "skipped" and found["nccl-buffsize"].severity == "skipped"


def test_a_model_on_the_grad_path_is_an_error_and_under_inference_mode_ok():
    model = build_model(TINY, seed=0)  # parameters require grad, as nn.Module makes them
    dep = from_model(model)
    assert dep.grad_enabled and dep.weights_requiring_grad == sum(p.numel() for p in model.parameters())
    assert checks.check_grad(dep, None).severity == "error"
    with torch.inference_mode():
        assert checks.check_grad(from_model(model), None).severity == "ok"
    with torch.no_grad():
        assert checks.check_grad(from_model(model), None).severity == "ok"
    model.requires_grad_(False)
    assert checks.check_grad(from_model(model), None).severity == "ok"


def test_autocast_over_a_fp32_model_is_seen_from_inside_the_context():
    model = build_model(TINY, seed=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dep = from_model(model)
    assert dep.autocast and dep.dtype == "fp32"
    assert checks.check_autocast(dep, None).severity == "warn"
    assert checks.check_autocast(from_model(model.to(torch.bfloat16)), None).severity == "ok"


# ------------------------------------------------------------------ the official package's source

TRAP_CORE = """
class Chat:
    class InferCodeParams:
        pass

    def infer(self, text, stream=False, params_infer_code=InferCodeParams()):
        return text
"""
FIXED_CORE = TRAP_CORE.replace("params_infer_code=InferCodeParams()", "params_infer_code=None")
TRAP_GPU = """
import torch
def select_device(min_memory=2047):
    for i in range(torch.cuda.device_count()):
        free = torch.cuda.get_device_properties(i).total_memory - torch.cuda.memory_reserved(i)
"""
FIXED_GPU = """
import torch
def select_device(min_memory=2047):
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
"""


def fake_package(root, version: str, core: str, gpu: str):
    pkg = root / "ChatTTS"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text(textwrap.dedent(core))
    (pkg / "utils" / "gpu.py").write_text(textwrap.dedent(gpu))
    meta = root / f"chattts-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: chattts\nVersion: {version}\n")
    return pkg


def test_source_traps_are_recognised_both_ways(tmp_path):
    trap = fake_package(tmp_path / "a", "0.2.5", TRAP_CORE, TRAP_GPU)
    fixed = fake_package(tmp_path / "b", "0.3.0", FIXED_CORE, FIXED_GPU)
    assert shared_default_params(trap / "core.py") is True
    assert shared_default_params(fixed / "core.py") is False
    assert select_device_ignores_others(trap) is True
    assert select_device_ignores_others(fixed) is False
    (trap / "core.py").write_text("def other():\n    pass\n")
    assert shared_default_params(trap / "core.py") is None  # not where 0.2.5 keeps it: cannot tell


def test_an_installed_package_is_found_by_its_metadata_not_imported(tmp_path, monkeypatch):
    root = tmp_path / "site"
    fake_package(root, "0.2.5", TRAP_CORE, TRAP_GPU + "\nraise SystemExit('imported!')\n")
    monkeypatch.syspath_prepend(str(root))
    pkg = chattts_package()
    assert pkg is not None and pkg.version == "0.2.5" and pkg.location.endswith("ChatTTS")
    assert pkg.shared_default_params is True and pkg.select_device_ignores_others is True


# ------------------------------------------------------------------ deployments


def test_a_running_ttsperf_server_reports_its_switches(live_server):
    dep = fetch_healthz(live_server)
    assert dep.source == f"{live_server}/healthz" and dep.device == "cpu"
    assert (dep.dtype, dep.autocast, dep.batching, dep.streaming, dep.max_batch) == (
        "fp32", False, "continuous", "incremental", 4,
    )  # fmt: skip


def test_a_server_without_healthz_is_unknown_not_an_error(mock_server):
    dep = fetch_healthz(mock_server)
    assert dep.batching is None and dep.device is None and "no JSON /healthz: HTTP 404" in dep.source
    [stream] = checks.check_streaming(make_facts(deployments=[dep]))
    assert stream.severity == "skipped"


def test_an_unreachable_server_is_one_clear_line():
    with pytest.raises(UserError, match=r"--url http://127.0.0.1:9: cannot reach"):
        fetch_healthz("http://127.0.0.1:9", timeout=2)


def test_a_profile_gives_its_runtime_switches(tmp_path):
    from ttsperf.profile.schema import DeviceInfo, Measured, ModelInfo, ModelProfile

    m = Measured(value=1, unit="B", how="test")
    prof = ModelProfile(
        device=DeviceInfo(name="NVIDIA GeForce RTX 4090", kind="cuda"),
        model=ModelInfo(config="chattts", dtype="fp32", parameters={"total": 1}, synthetic=True),
        runtime={"inference_mode": True, "tf32": False, "cudnn_benchmark": False, "dtype": "fp32"},
        weights_bytes=m,
        kv_bytes_per_token=m,
    )
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof.dump()))
    dep = from_profile(path)
    assert (dep.device, dep.dtype, dep.tf32, dep.cudnn_benchmark, dep.grad_enabled) == (
        "cuda",
        "fp32",
        False,
        False,
        False,
    )
    assert checks.check_cudnn_benchmark(dep, None).severity == "warn"


@pytest.mark.slow
def test_probe_tells_a_serial_server_from_one_that_overlaps_requests(mock_servers):
    serial = collect(urls=[mock_servers[1]], probe=True).deployments[0]
    assert serial.batching == "none" and "served one at a time" in serial.batching_evidence
    [warn] = checks.check_batching(make_facts(deployments=[serial]))
    assert warn.severity == "warn" and "probe: one request" in warn.evidence
    overlapping = collect(urls=[mock_servers[0]], probe=True).deployments[0]
    assert overlapping.batching == "concurrent"
    [info] = checks.check_batching(make_facts(deployments=[overlapping]))
    assert info.severity == "info"


def test_probe_leaves_a_ttsperf_server_alone(live_server):
    dep = collect(urls=[live_server], probe=True).deployments[0]
    assert dep.batching == "continuous" and dep.batching_evidence == ""
