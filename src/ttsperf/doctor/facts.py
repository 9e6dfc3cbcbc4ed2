"""What the doctor looks at: one snapshot of facts, collected once, then judged by pure checks.

Facts come from this process (torch's build and flags, GPUs, environment, GPU processes through
NVML, the official ChatTTS package's source if installed) and from a deployment: a running
server's `/healthz` (`--url`), a profile's `runtime` (`--profile`), or, when neither is given,
what `ttsperf serve` would run with on this machine. A fact nobody could observe is `None`, and
the check that needs it says it was skipped and why.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttsperf.errors import UserError

ENV_VARS = ("NCCL_BUFFSIZE", "CUDA_VISIBLE_DEVICES", "WORLD_SIZE", "LOCAL_RANK", "CUDA_DEVICE_ORDER")


@dataclass
class Gpu:
    index: int
    name: str
    memory_bytes: int
    capability: tuple[int, int]


@dataclass
class Deployment:
    """The serving path's settings, wherever they were read from."""

    source: str  # "ttsperf serve defaults", "http://host:8080/healthz", "profile.json"
    device: str | None = None  # "cpu", "cuda", "cuda:1"
    dtype: str | None = None  # the weights' storage type: fp32 | fp16 | bf16
    autocast: bool | None = None
    tf32: bool | None = None
    cudnn_benchmark: bool | None = None
    grad_enabled: bool | None = None  # autograd records the forward (no inference_mode/no_grad)
    weights_requiring_grad: int | None = None  # parameters with requires_grad=True
    batching: str | None = None  # "continuous" | "concurrent" | "none" (serial) | None (unknown)
    batching_evidence: str = ""  # how it was found out (a probe's timings)
    streaming: str | None = None  # "incremental" | "re-decode" | None
    max_batch: int | None = None
    model: str | None = None  # the model config it serves (`chattts`, `tiny`), where it says
    engines: int | None = None  # serve --engines: engine processes on its device

    @property
    def on_cuda(self) -> bool | None:
        return None if self.device is None else self.device.startswith("cuda")


@dataclass
class ChatTTSPackage:
    """The official `chattts` package, read as source (importing it needs torchaudio)."""

    version: str
    location: str
    shared_default_params: bool | None  # Chat.infer(params_infer_code=InferCodeParams()) in the signature
    select_device_ignores_others: bool | None  # picks by own reserved memory, not mem_get_info


@dataclass
class Facts:
    torch_version: str
    cuda_available: bool
    gpus: list[Gpu]
    torch_flags: dict[str, Any]  # this process's defaults: what a server that sets nothing gets
    env: dict[str, str | None]
    gpu_processes: dict[int, list[int]] | None  # GPU index -> PIDs (NVML); None: unobservable
    gpu_processes_note: str = ""
    chattts: ChatTTSPackage | None = None
    deployments: list[Deployment] = field(default_factory=list)
    mps_daemons: list[int] | None = None  # PIDs of a running CUDA MPS control daemon; None: unreadable

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)


def torch_facts() -> tuple[str, bool, list[Gpu], dict[str, Any]]:
    import torch

    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(Gpu(i, p.name, int(p.total_memory), (p.major, p.minor)))
    flags = {
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "grad_enabled": torch.is_grad_enabled(),
    }
    return torch.__version__, torch.cuda.is_available(), gpus, flags


def gpu_processes() -> tuple[dict[int, list[int]] | None, str]:
    """Compute processes per GPU from NVML, or None with the reason it could not be read."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, f"NVML unavailable ({exc}): no NVIDIA driver on this machine"
    try:
        return {
            i: sorted(
                p.pid
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i))
            )
            for i in range(pynvml.nvmlDeviceGetCount())
        }, "NVML compute processes"
    except pynvml.NVMLError as exc:  # MIG slices and locked-down containers refuse the listing
        return None, f"NVML cannot list compute processes ({exc})"
    finally:
        pynvml.nvmlShutdown()


def ttsperf_defaults(device: str) -> Deployment:
    """What `ttsperf serve` runs with here when given no flags."""
    from ttsperf.engine.switches import Switches

    s = Switches()
    return Deployment(
        source="ttsperf serve defaults",
        device=device,
        dtype=s.dtype,
        autocast=s.autocast,
        tf32=s.tf32,
        cudnn_benchmark=s.cudnn_benchmark,
        grad_enabled=False,  # the engine's worker runs under inference_mode (or no_grad)
        batching="continuous",
        streaming="incremental",
    )


def from_model(model, source: str = "this process") -> Deployment:
    """A model in this process, as its serving code runs it now: call it where the forward runs
    (inside the server's inference context) to see what that context records."""
    import torch

    params = list(model.parameters())
    names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
    device = params[0].device if params else torch.device("cpu")
    return Deployment(
        source=source,
        device=str(device),
        dtype=names.get(params[0].dtype) if params else None,
        autocast=torch.is_autocast_enabled(device.type),
        grad_enabled=torch.is_grad_enabled() and not torch.is_inference_mode_enabled(),
        weights_requiring_grad=sum(p.numel() for p in params if p.requires_grad),
    )


def from_healthz(url: str, body: dict[str, Any]) -> Deployment:
    """A ttsperf server's /healthz -> Deployment; other servers' bodies give what they say."""
    switches = body.get("switches") if isinstance(body.get("switches"), dict) else {}

    def value(name: str):
        s = switches.get(name)
        return s.get("value") if isinstance(s, dict) else None

    ttsperf = "switches" in body and "config" in body
    dep = Deployment(source=url, device=body.get("device") if isinstance(body.get("device"), str) else None)
    if ttsperf:
        dep.dtype = value("dtype")
        dep.autocast = value("autocast")
        dep.tf32 = value("tf32")
        dep.cudnn_benchmark = value("cudnn_benchmark")
        dep.grad_enabled = False  # inference_mode or no_grad, both record nothing
        dep.batching = "continuous"
        dep.streaming = "incremental"
        dep.max_batch = body.get("max_batch") if isinstance(body.get("max_batch"), int) else None
        dep.model = body.get("model") if isinstance(body.get("model"), str) else None
        dep.engines = body.get("engines", 1) if isinstance(body.get("engines", 1), int) else None
    return dep


def from_profile(path: Path) -> Deployment:
    from ttsperf.profile.schema import load_profile

    p = load_profile(path)
    rt = p.runtime

    def flag(name: str) -> bool | None:
        v = rt.get(name)
        return v if isinstance(v, bool) else None

    inference = flag("inference_mode")
    return Deployment(
        source=str(path),
        device=p.device.kind,
        dtype=p.model.dtype,
        autocast=flag("autocast"),
        tf32=flag("tf32"),
        cudnn_benchmark=flag("cudnn_benchmark"),
        grad_enabled=None if inference is None else False,
    )


def fetch_healthz(url: str, timeout: float = 10.0) -> Deployment:
    """GET URL/healthz. A server without one is a deployment we know nothing about, not an error;
    one that cannot be reached is a usage error (the URL is wrong or the server is down)."""
    base = url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:  # an answer all the same: what it says is read below
        status, raw = exc.code, exc.read()
    except (OSError, ValueError) as exc:  # unreachable, timed out, or not an http(s) URL
        raise UserError(f"--url {url}: cannot reach {base}/healthz ({type(exc).__name__}: {exc})") from None
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return Deployment(source=f"{base} (no JSON /healthz: HTTP {status})")
    return from_healthz(f"{base}/healthz", body)


def chattts_package() -> ChatTTSPackage | None:
    """The official package's version and its traps, read from its source without importing it."""
    try:
        version = importlib.metadata.version("chattts")
    except importlib.metadata.PackageNotFoundError:
        return None
    spec = importlib.util.find_spec("ChatTTS")
    if spec is None or not spec.submodule_search_locations:
        return ChatTTSPackage(version, "?", None, None)
    from ttsperf.doctor.chattts_source import select_device_ignores_others, shared_default_params

    root = Path(next(iter(spec.submodule_search_locations)))
    return ChatTTSPackage(
        version, str(root), shared_default_params(root / "core.py"), select_device_ignores_others(root)
    )


MPS_DAEMONS = ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")


def mps_daemons(proc: Path = Path("/proc")) -> list[int] | None:
    """PIDs of CUDA MPS's control daemon and servers on this machine (their process names in
    /proc/PID/comm, which Linux cuts at 15 characters); None where /proc cannot be listed."""
    try:
        entries = [e for e in proc.iterdir() if e.name.isdigit()]
    except OSError:
        return None
    found = []
    for e in entries:
        try:
            name = (e / "comm").read_text().strip()
        except OSError:  # gone, or not ours to read
            continue
        if any(d.startswith(name) for d in MPS_DAEMONS) and name.startswith("nvidia-cuda-mps"):
            found.append(int(e.name))
    return sorted(found)


def collect(
    urls: list[str] | None = None,
    profiles: list[Path] | None = None,
    probe: bool = False,
) -> Facts:
    """`probe`: ask each server that /healthz leaves unknown whether it batches (sends requests)."""
    version, cuda, gpus, flags = torch_facts()
    procs, note = gpu_processes()
    read = [from_profile(p) for p in profiles or []]  # a bad profile fails before any server is asked
    servers = [fetch_healthz(u) for u in urls or []]
    if probe:
        from ttsperf.doctor.probe import probe_batching

        for url, dep in zip(urls or [], servers, strict=True):
            if dep.batching is None:
                dep.batching, dep.batching_evidence = probe_batching(url)
    deployments = servers + read
    if not deployments:
        deployments = [ttsperf_defaults("cuda" if cuda else "cpu")]
    return Facts(
        torch_version=version,
        cuda_available=cuda,
        gpus=gpus,
        torch_flags=flags,
        env={k: os.environ.get(k) for k in ENV_VARS},
        gpu_processes=procs,
        gpu_processes_note=note,
        chattts=chattts_package(),
        deployments=deployments,
        mps_daemons=mps_daemons(),
    )
