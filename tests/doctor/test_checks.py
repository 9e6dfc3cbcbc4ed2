"""Each check, positive and negative, on facts built by hand (no GPU needed to judge GPU facts)."""

from __future__ import annotations

import pytest

from ttsperf.doctor import checks
from ttsperf.doctor.facts import Deployment

from .conftest import cuda_dep, make_facts, package


def sev(finding) -> str:
    return finding.severity


# ------------------------------------------------------------------ runtime switches


def test_cudnn_benchmark_off_on_cuda_warns_with_the_fix():
    f = checks.check_cudnn_benchmark(cuda_dep(cudnn_benchmark=False), make_facts(1))
    assert f.severity == "warn" and "cudnn.benchmark = False" in f.evidence
    assert "torch.backends.cudnn.benchmark = True" in f.fix


def test_cudnn_benchmark_on_is_ok():
    assert sev(checks.check_cudnn_benchmark(cuda_dep(cudnn_benchmark=True), make_facts(1))) == "ok"


@pytest.mark.parametrize(
    "check", [checks.check_cudnn_benchmark, checks.check_tf32], ids=["cudnn-benchmark", "tf32"]
)
def test_cuda_only_switches_are_skipped_on_cpu_not_passed(check):
    f = check(cuda_dep(device="cpu", cudnn_benchmark=False, tf32=False), make_facts(0))
    assert f.severity == "skipped" and f.needs == "a CUDA GPU" and "cpu" in f.evidence


def test_unreported_switch_is_skipped():
    f = checks.check_cudnn_benchmark(cuda_dep(cudnn_benchmark=None), make_facts(1))
    assert f.severity == "skipped" and "does not report" in f.evidence


def test_tf32_off_with_fp32_matmuls_on_ampere_warns():
    f = checks.check_tf32(cuda_dep(tf32=False), make_facts(1))
    assert f.severity == "warn" and "allow_tf32 = True" in f.fix


def test_tf32_on_is_ok_and_off_is_only_info_where_it_cannot_matter():
    assert sev(checks.check_tf32(cuda_dep(tf32=True), make_facts(1))) == "ok"
    # a Turing card (7.5) has no TF32; fp16 weights do no fp32 matmul
    assert sev(checks.check_tf32(cuda_dep(tf32=False), make_facts(1, cap=(7, 5)))) == "info"
    assert sev(checks.check_tf32(cuda_dep(tf32=False, dtype="fp16"), make_facts(1))) == "info"


def test_grad_enabled_with_weights_requiring_grad_is_an_error():
    f = checks.check_grad(cuda_dep(grad_enabled=True, weights_requiring_grad=279_657_740), make_facts(1))
    assert f.severity == "error" and "279,657,740" in f.evidence and "inference_mode" in f.fix


def test_grad_off_or_nothing_requiring_grad_is_ok():
    on_path = cuda_dep(grad_enabled=False, weights_requiring_grad=10)
    assert sev(checks.check_grad(on_path, make_facts(1))) == "ok"
    assert (
        sev(checks.check_grad(cuda_dep(grad_enabled=True, weights_requiring_grad=0), make_facts(1))) == "ok"
    )
    assert sev(checks.check_grad(cuda_dep(grad_enabled=None), make_facts(1))) == "skipped"


def test_autocast_over_fp32_weights_warns_with_the_halved_size():
    f = checks.check_autocast(cuda_dep(autocast=True, dtype="fp32"), make_facts(1))
    assert f.severity == "warn" and "1.12 GB" in f.evidence and "0.56 GB" in f.evidence
    assert "--dtype fp16 or bf16" in f.fix


@pytest.mark.parametrize(
    "dtype,autocast", [("fp16", False), ("bf16", False), ("fp32", False), ("fp16", True)]
)
def test_half_weights_or_no_autocast_is_ok(dtype, autocast):
    assert sev(checks.check_autocast(cuda_dep(autocast=autocast, dtype=dtype), make_facts(1))) == "ok"


# ------------------------------------------------------------------ GPUs


def test_nccl_buffsize_unset_on_several_gpus_warns():
    f = checks.check_nccl(make_facts(2))
    assert f.severity == "warn" and "NCCL_BUFFSIZE=2097152" in f.fix


def test_nccl_buffsize_set_is_ok_and_one_gpu_is_skipped():
    assert sev(checks.check_nccl(make_facts(2, env={"NCCL_BUFFSIZE": "2097152"}))) == "ok"
    f = checks.check_nccl(make_facts(1))
    assert f.severity == "skipped" and f.needs == "two or more GPUs"


def test_processes_piled_on_gpu0_while_others_idle_is_an_error():
    f = checks.check_gpu_placement(make_facts(2, gpu_processes={0: [101, 102], 1: []}))
    assert f.severity == "error" and "101, 102" in f.evidence and "CUDA_VISIBLE_DEVICES" in f.fix


def test_nvml_sees_the_gpus_a_pinned_process_does_not():
    # this process sees one GPU (CUDA_VISIBLE_DEVICES=0), the machine has two with both servers on GPU 0
    facts = make_facts(1, gpu_processes={0: [101, 102], 1: []}, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert checks.check_gpu_placement(facts).severity == "error"


def test_processes_spread_over_gpus_is_ok():
    assert sev(checks.check_gpu_placement(make_facts(2, gpu_processes={0: [101], 1: [102]}))) == "ok"


def test_official_select_device_without_pinning_warns_and_pinning_clears_it():
    trap = make_facts(2, chattts=package())
    assert sev(checks.check_gpu_placement(trap)) == "warn"
    pinned = make_facts(2, chattts=package(), env={"CUDA_VISIBLE_DEVICES": "1"})
    assert sev(checks.check_gpu_placement(pinned)) == "ok"


def test_gpu_placement_without_nvml_is_skipped():
    f = checks.check_gpu_placement(make_facts(2, gpu_processes=None, gpu_processes_note="no NVML"))
    assert f.severity == "skipped" and f.needs == "NVML"


# ------------------------------------------------------------------ ChatTTS's traps


def test_shared_default_params_in_the_official_package_warns():
    f = checks.check_shared_params(make_facts(chattts=package(shared_default_params=True)))
    assert f.severity == "warn" and "InferCodeParams()" in f.evidence and "fresh" in f.fix


def test_shared_default_params_absent_or_not_installed():
    assert sev(checks.check_shared_params(make_facts(chattts=package(shared_default_params=False)))) == "ok"
    assert sev(checks.check_shared_params(make_facts(chattts=None))) == "skipped"


@pytest.mark.parametrize("check", [checks.check_streaming, checks.check_batching], ids=["stream", "batch"])
def test_official_package_traps_warn_for_the_examined_version_only(check):
    [old] = check(make_facts(chattts=package(version="0.2.5")))
    assert old.severity == "warn" and "0.2.5" in old.evidence and "ttsperf serve" in old.fix
    [new] = check(make_facts(chattts=package(version="0.3.0")))
    assert new.severity == "info" and "not examined" in new.evidence
    assert check(make_facts(chattts=None)) == []
    [pre] = check(make_facts(chattts=package(version="0.2.5rc1")))  # 0.2.5's pre-release: no newer
    assert pre.severity == "warn"


def test_deployment_that_re_decodes_or_waits_for_its_longest_row_warns():
    bad = Deployment("http://other:9000", streaming="re-decode", batching="static")
    good = cuda_dep()
    unknown = Deployment("http://other:9000 (no JSON /healthz: HTTP 404)")
    for check in (checks.check_streaming, checks.check_batching):
        assert [f.severity for f in check(make_facts(deployments=[bad, good, unknown]))] == [
            "warn",
            "ok",
            "skipped",
        ]


def test_run_checks_reports_every_check_once_per_deployment():
    facts = make_facts(2, deployments=[cuda_dep(), cuda_dep(source="b")])
    ids = [f.id for f in checks.run_checks(facts)]
    for per_deployment in ("cudnn-benchmark", "tf32", "grad", "autocast-fp32-weights"):
        assert ids.count(per_deployment) == 2
    for once in ("environment", "nccl-buffsize", "gpu-placement", "chattts-shared-params"):
        assert ids.count(once) == 1


def test_mps_is_named_where_one_gpu_would_run_several_engines(tmp_path):
    """Issue 33 item 6: without CUDA MPS, processes on one GPU take turns (on the H200 a second
    server process added nothing); doctor says whether the daemon runs, from /proc."""
    from ttsperf.doctor.facts import mps_daemons

    assert checks.check_mps(make_facts(0, mps_daemons=[])).severity == "skipped"
    assert checks.check_mps(make_facts(1, mps_daemons=None)).severity == "skipped"
    running = checks.check_mps(make_facts(1, mps_daemons=[4242]))
    assert running.severity == "ok" and "4242" in running.evidence
    absent = checks.check_mps(make_facts(1, mps_daemons=[]))
    assert absent.severity == "info" and "nvidia-cuda-mps-control -d" in absent.fix
    # a server of `serve --engines 2` on a GPU: without the daemon a warning names it
    two = cuda_dep(source="http://127.0.0.1:8080/healthz", engines=2)
    warned = checks.check_mps(make_facts(1, mps_daemons=[], deployments=[two]))
    assert warned.severity == "warn" and warned.subject == two.source and "2 engines" in warned.evidence
    assert checks.check_mps(make_facts(1, mps_daemons=[7], deployments=[two])).severity == "ok"
    assert checks.check_mps(make_facts(1, mps_daemons=[], deployments=[cuda_dep()])).severity == "info"
    # a /proc laid out as Linux does: comm holds the name cut at 15 characters
    for pid, name in ((10, "python3"), (11, "nvidia-cuda-mps"), (12, "nvidia-smi"), (13, "nvidia-cuda-mps")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(name + "\n")
    (tmp_path / "self").mkdir()
    assert mps_daemons(tmp_path) == [11, 13]
    assert mps_daemons(tmp_path / "absent") is None
