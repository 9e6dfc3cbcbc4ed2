"""Facts built by hand, so each check runs both ways on a CPU-only machine."""

from __future__ import annotations

import pytest

from ttsperf.doctor.facts import ChatTTSPackage, Deployment, Facts, Gpu


def gpu(i: int, cap: tuple[int, int] = (8, 9)) -> Gpu:
    return Gpu(i, "NVIDIA GeForce RTX 4090", 24 * 2**30, cap)


def make_facts(gpus: int = 0, cap: tuple[int, int] = (8, 9), **kw) -> Facts:
    base = dict(
        torch_version="2.13.0",
        cuda_available=gpus > 0,
        gpus=[gpu(i, cap) for i in range(gpus)],
        torch_flags={},
        env={"NCCL_BUFFSIZE": None, "CUDA_VISIBLE_DEVICES": None},
        gpu_processes=None if gpus == 0 else {i: [] for i in range(gpus)},
        gpu_processes_note="NVML unavailable (test)" if gpus == 0 else "NVML compute processes",
        deployments=[],
    )
    base.update(kw)
    return Facts(**base)


def cuda_dep(**kw) -> Deployment:
    base = dict(
        source="http://gpu-box:8080/healthz", device="cuda:0", dtype="fp32", autocast=False, tf32=True,
        cudnn_benchmark=True, grad_enabled=False, batching="continuous", streaming="incremental",
    )  # fmt: skip
    base.update(kw)
    return Deployment(**base)


def package(**kw) -> ChatTTSPackage:
    base = dict(
        version="0.2.5",
        location="/site/ChatTTS",
        shared_default_params=True,
        select_device_ignores_others=True,
    )
    base.update(kw)
    return ChatTTSPackage(**base)


@pytest.fixture
def facts():
    return make_facts


@pytest.fixture(scope="module")
def live_server():
    """A real ttsperf server (tiny synthetic model, batch 4) on loopback: its URL."""
    from server.helpers import start_live

    live = start_live(max_batch=4)
    yield live.url
    live.stop()


def _start_mock(slots: int, service_time: float):
    import subprocess
    import sys

    args = [sys.executable, "-m", "ttsperf.bench.mock_server", "--port", "0"]
    proc = subprocess.Popen(
        [*args, "--slots", str(slots), "--service-time", str(service_time)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()
    assert line.startswith("listening on "), (line, proc.stderr.read())
    return proc, line.split()[-1]


@pytest.fixture(scope="module")
def mock_servers():
    """Servers that are not ttsperf (bench's mock, no /healthz): {1: serial URL, 0: unlimited URL}."""
    started = {slots: _start_mock(slots, 0.3) for slots in (1, 0)}
    yield {slots: url for slots, (_, url) in started.items()}
    for proc, _ in started.values():
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def mock_server(mock_servers):
    return mock_servers[1]
