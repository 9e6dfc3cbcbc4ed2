"""The checks: pure functions from facts to findings, so each one is tested both ways on any machine.

A finding has an id, a severity, the subject it is about (this machine or a deployment), what was
seen (evidence) and what to do (fix). Severity: `error` (it will fail or waste memory at scale),
`warn` (it costs speed or memory), `info`, `ok`, or `skipped` — the check needs something this
machine or these inputs do not have (a CUDA GPU, two GPUs, a server), named in `needs`. A skipped
check has not passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

from ttsperf.doctor.facts import Deployment, Facts

Severity = Literal["error", "warn", "info", "ok", "skipped"]
SEVERITIES: tuple[Severity, ...] = ("error", "warn", "info", "ok", "skipped")
MACHINE = "this machine"
# The version whose traps docs/reference/chattts.md documents (read from its source and measured).
CHATTTS_EXAMINED = (0, 2, 5)


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    subject: str
    title: str
    evidence: str
    fix: str = ""
    needs: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _skip(id_: str, subject: str, title: str, needs: str, why: str) -> Finding:
    return Finding(id_, "skipped", subject, title, why, needs=needs)


# ------------------------------------------------------------------ a deployment's runtime switches


def _unreported(id_: str, title: str, dep: Deployment, what: str) -> Finding:
    return _skip(
        id_, dep.source, title, f"the deployment's {what}", f"the deployment does not report its {what}"
    )


def _cuda_switch(id_: str, title: str, dep: Deployment, value: bool | None) -> Finding | None:
    """Skipped unless the deployment runs on CUDA and reports the switch."""
    if dep.on_cuda is None:
        return _unreported(id_, title, dep, "device")
    if not dep.on_cuda:
        return _skip(id_, dep.source, title, "a CUDA GPU", f"the deployment runs on {dep.device}: CUDA-only")
    if value is None:
        return _unreported(id_, title, dep, "switches")
    return None


def check_cudnn_benchmark(dep: Deployment, facts: Facts) -> Finding:
    id_, title = "cudnn-benchmark", "cudnn.benchmark on (the guide's pitfall 3)"
    if skipped := _cuda_switch(id_, title, dep, dep.cudnn_benchmark):
        return skipped
    if dep.cudnn_benchmark:
        return Finding(id_, "ok", dep.source, title, "cudnn.benchmark = True")
    return Finding(
        id_, "warn", dep.source, title,
        "cudnn.benchmark = False: cuDNN runs its default convolution kernels instead of timing the "
        "candidates; the Decoder and Vocos are 1-D convolutions (the guide: -18% fp16 on an RTX 4090, "
        "unmeasured here)",
        "torch.backends.cudnn.benchmark = True at start-up (ttsperf serve: the default; "
        "--no-cudnn-benchmark turns it off)",
    )  # fmt: skip


def check_tf32(dep: Deployment, facts: Facts) -> Finding:
    id_, title = "tf32", "TF32 matmuls on Ampere or newer"
    if skipped := _cuda_switch(id_, title, dep, dep.tf32):
        return skipped
    old = [g.name for g in facts.gpus if g.capability < (8, 0)]
    if facts.gpus and len(old) == len(facts.gpus):
        return Finding(
            id_, "info", dep.source, title, f"{', '.join(old)}: no TF32 before compute capability 8.0"
        )
    if dep.tf32:
        return Finding(id_, "ok", dep.source, title, "TF32 allowed for matmuls and cuDNN")
    if dep.dtype in ("fp16", "bf16") and not dep.autocast:
        return Finding(
            id_, "info", dep.source, title, f"TF32 off, but the weights are {dep.dtype}: no fp32 matmul"
        )
    return Finding(
        id_, "warn", dep.source, title,
        "TF32 off with fp32 matmuls: Ampere+ tensor cores go unused (torch's default for matmul "
        "since 1.12; the guide: +8% with it on, unmeasured here)",
        "torch.backends.cuda.matmul.allow_tf32 = True and torch.backends.cudnn.allow_tf32 = True "
        "(ttsperf serve: the default), or serve fp16/bf16 weights",
    )  # fmt: skip


def check_grad(dep: Deployment, facts: Facts) -> Finding:
    id_, title = "grad", "no autograd on the serving path"
    if dep.grad_enabled is None:
        return _unreported(id_, title, dep, "grad mode")
    req = dep.weights_requiring_grad
    if not dep.grad_enabled:
        note = f"; {req:,} parameters still require grad, harmless here" if req else ""
        return Finding(id_, "ok", dep.source, title, f"forward runs under inference_mode/no_grad{note}")
    if req is None:
        return Finding(
            id_, "warn", dep.source, title,
            "grad mode is on; whether weights require grad is unknown",
            "wrap the serving forward in torch.inference_mode()",
        )  # fmt: skip
    if req == 0:
        return Finding(
            id_, "ok", dep.source, title, "grad mode is on, but no parameter requires grad: nothing recorded"
        )
    return Finding(
        id_, "error", dep.source, title,
        f"grad mode is on and {req:,} parameters require grad: every forward keeps its activations "
        "for a backward that never comes, memory grows with batch x length",
        "wrap the serving forward in torch.inference_mode() (or model.requires_grad_(False))",
    )  # fmt: skip


def check_autocast(dep: Deployment, facts: Facts) -> Finding:
    id_, title = "autocast-fp32-weights", "half-precision weights instead of autocast over fp32"
    if dep.autocast is None or dep.dtype is None:
        return _unreported(id_, title, dep, "dtype and autocast")
    if not (dep.autocast and dep.dtype == "fp32"):
        return Finding(
            id_, "ok", dep.source, title, f"weights {dep.dtype}, autocast {'on' if dep.autocast else 'off'}"
        )
    from ttsperf.model.config import CHATTTS
    from ttsperf.model.info import model_info

    w = model_info(CHATTTS)["weights_bytes"]
    return Finding(
        id_, "warn", dep.source, title,
        f"autocast over fp32 weights: the weights stay fp32 ({w['fp32'] / 1e9:.2f} GB for ChatTTS) and "
        f"autocast casts them per op; stored as fp16/bf16 they take {w['fp16'] / 1e9:.2f} GB, and the "
        "KV cache halves with them",
        "load the weights in half precision (model.half() / .to(torch.bfloat16); ttsperf serve: "
        "--dtype fp16 or bf16, without --autocast)",
    )  # fmt: skip


DEPLOYMENT_CHECKS: tuple[Callable[[Deployment, Facts], Finding], ...] = (
    check_cudnn_benchmark,
    check_tf32,
    check_grad,
    check_autocast,
)


# ------------------------------------------------------------------ the machine's GPUs


def check_nccl(facts: Facts) -> Finding:
    id_, title = "nccl-buffsize", "NCCL_BUFFSIZE set on a multi-GPU machine (the guide's pitfall 2)"
    if facts.gpu_count < 2:
        return _skip(
            id_, MACHINE, title, "two or more GPUs", f"{facts.gpu_count} CUDA GPU(s) here: NCCL has no peer"
        )
    value = facts.env.get("NCCL_BUFFSIZE")
    if value:
        return Finding(id_, "ok", MACHINE, title, f"NCCL_BUFFSIZE={value} with {facts.gpu_count} GPUs")
    return Finding(
        id_, "warn", MACHINE, title,
        f"{facts.gpu_count} GPUs and NCCL_BUFFSIZE unset: the buffers NCCL uses between pairs of GPUs "
        "take its default size (4 MiB, not 2x the card as the guide says); only collectives (tensor "
        "parallel, DDP) use them — one replica per GPU, as ttsperf serve runs, uses none",
        "export NCCL_BUFFSIZE=2097152 (2 MiB, the guide's value) if the deployment uses NCCL collectives",
    )  # fmt: skip


def check_gpu_placement(facts: Facts) -> Finding:
    id_, title = "gpu-placement", "serving processes spread over the GPUs, not all on cuda:0"
    procs = facts.gpu_processes
    # NVML sees every GPU of the machine; torch only those CUDA_VISIBLE_DEVICES leaves this process
    gpus = len(procs) if procs is not None else facts.gpu_count
    if gpus < 2:
        return _skip(id_, MACHINE, title, "two or more GPUs", f"{gpus} CUDA GPU(s) here: nothing to spread")
    pinned = facts.env.get("CUDA_VISIBLE_DEVICES")
    trap = facts.chattts is not None and facts.chattts.select_device_ignores_others
    if procs is not None:
        first, others = len(procs.get(0, [])), [len(v) for i, v in procs.items() if i != 0]
        if first >= 2 and others and min(others) == 0:
            return Finding(
                id_, "error", MACHINE, title,
                f"{first} processes on GPU 0 (PIDs {', '.join(map(str, procs[0]))}) while "
                f"{others.count(0)} GPU(s) run none ({facts.gpu_processes_note})",
                "start each server with its own CUDA_VISIBLE_DEVICES=N (or ttsperf serve --device cuda:N)",
            )  # fmt: skip
    if trap and not pinned:
        return Finding(
            id_, "warn", MACHINE, title,
            f"chattts {facts.chattts.version}'s select_device ranks GPUs by the process's own reserved "
            "memory, the same for identical GPUs in a fresh process: every instance lands on cuda:0; "
            "CUDA_VISIBLE_DEVICES is unset",
            "start each instance with its own CUDA_VISIBLE_DEVICES=N",
        )  # fmt: skip
    if procs is None:
        return _skip(id_, MACHINE, title, "NVML", facts.gpu_processes_note)
    counts = ", ".join(f"GPU {i}: {len(v)}" for i, v in procs.items())
    return Finding(id_, "ok", MACHINE, title, f"compute processes per GPU (NVML index) {counts}")


def check_mps(facts: Facts) -> Finding:
    """More than one engine process on one GPU shares it only under CUDA MPS: without it the
    contexts take turns (time slices), so a second `ttsperf serve` on the card adds nothing, and
    `serve --engines N` on one GPU is worth it only under MPS."""
    id_, title = "cuda-mps", "CUDA MPS for more than one engine process per GPU"
    if facts.gpu_count == 0:  # a server on a GPU elsewhere: doctor on its machine reads its daemon
        return _skip(id_, MACHINE, title, "a CUDA GPU", "no CUDA GPU here: nothing to share")
    several = [d for d in facts.deployments if d.on_cuda and (d.engines or 1) > 1]
    if facts.mps_daemons is None:
        return _skip(id_, MACHINE, title, "a readable /proc", "cannot list this machine's processes")
    if facts.mps_daemons:
        pids = ", ".join(map(str, facts.mps_daemons))
        return Finding(
            id_, "ok", MACHINE, title,
            f"the MPS daemon runs (PID {pids}): engine processes on one GPU run their kernels at once",
        )  # fmt: skip
    start = "start MPS (nvidia-cuda-mps-control -d) before running more than one engine process per GPU"
    if several:
        dep = several[0]
        return Finding(
            id_, "warn", dep.source, title,
            f"it runs {dep.engines} engines on {dep.device} and no CUDA MPS daemon runs on this machine: "
            "their kernels take turns in time slices (on an H200 a second server process added nothing)",
            f"{start}, or serve one engine per GPU (--engines 1)",
        )  # fmt: skip
    return Finding(
        id_, "info", MACHINE, title,
        "no CUDA MPS daemon: processes on one GPU take turns in time slices; on an H200 a second "
        "server process on the card added nothing (docs/measurements/h200-2026-12-04); one engine "
        "process per GPU is served at its best without it",
        f"where one host core per engine binds (plan's 'binds: host', serve --engines N), {start}",
    )  # fmt: skip


# ------------------------------------------------------------------ ChatTTS's own traps


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split("."):
        digits = re.match(r"\d+", p)  # the leading number only: 0.2.5rc1 is (0, 2, 5)
        if not digits:
            break
        parts.append(int(digits[0]))
    return tuple(parts)


def check_shared_params(facts: Facts) -> Finding:
    id_, title = "chattts-shared-params", "official ChatTTS: no shared default InferCodeParams"
    pkg = facts.chattts
    if pkg is None:
        return _skip(id_, MACHINE, title, "the official chattts package", "chattts is not installed here")
    if pkg.shared_default_params is None:
        return Finding(
            id_, "info", MACHINE, title, f"chattts {pkg.version} at {pkg.location}: Chat.infer not found"
        )
    if not pkg.shared_default_params:
        return Finding(
            id_,
            "ok",
            MACHINE,
            title,
            f"chattts {pkg.version}: Chat.infer builds no params object as a default",
        )
    return Finding(
        id_, "warn", MACHINE, title,
        f"chattts {pkg.version} ({pkg.location}/core.py): Chat.infer's default params_infer_code="
        "InferCodeParams() is one object shared by every call; a multi-sentence call writes a "
        "reference voice into it that leaks into later calls",
        "pass a fresh ChatTTS.Chat.InferCodeParams(...) (and RefineTextParams) on every call",
    )  # fmt: skip


def _behaviour(
    facts: Facts, id_: str, title: str, attr: str, good: str, pkg_trap: str, fix: str
) -> list[Finding]:
    """One finding per deployment that says how it batches/streams, plus one for the package."""
    out = []
    pkg = facts.chattts
    if pkg is not None:
        v = _version(pkg.version)
        sev: Severity = "warn" if v and v <= CHATTTS_EXAMINED else "info"
        seen = "" if sev == "warn" else f" (seen in 0.2.5; version {pkg.version} not examined)"
        out.append(
            Finding(id_, sev, MACHINE, title, f"chattts {pkg.version} is installed: {pkg_trap}{seen}", fix)
        )
    for dep in facts.deployments:
        value = getattr(dep, attr)
        seen = f"{attr}: {value}" + (
            f"; {dep.batching_evidence}" if attr == "batching" and dep.batching_evidence else ""
        )
        if value is None:
            needs = "a ttsperf /healthz" + (" or --probe" if attr == "batching" else "")
            out.append(_skip(id_, dep.source, title, needs, "the deployment does not say"))
        elif value == good:
            out.append(Finding(id_, "ok", dep.source, title, seen))
        elif value == "concurrent":
            out.append(Finding(id_, "info", dep.source, title, seen))
        else:
            out.append(Finding(id_, "warn", dep.source, title, seen, fix))
    return out


def check_streaming(facts: Facts) -> list[Finding]:
    return _behaviour(
        facts, "chattts-stream-redecode", "streaming decodes only new frames", "streaming", "incremental",
        "its stream=True re-decodes the whole prefix every 24 steps (O(n^2) Decoder+Vocos work) and "
        "drops the first 2 yields, so first audio waits 72 steps (1.54 s of audio)",
        "serve with ttsperf serve (each chunk decodes its new frames plus a small left context)",
    )  # fmt: skip


def check_batching(facts: Facts) -> list[Finding]:
    return _behaviour(
        facts, "chattts-batch-waits-longest", "a batch does not wait for its longest row",
        "batching", "continuous",
        "a batch of texts runs until its longest row ends, finished rows keep computing, and "
        "requests are not batched across callers",
        "serve with ttsperf serve (continuous batching: a finished row frees its slot at once)",
    )  # fmt: skip


def environment(facts: Facts) -> Finding:
    gpus = ", ".join(f"cuda:{g.index} {g.name} ({g.memory_bytes / 2**30:.0f} GiB)" for g in facts.gpus)
    flags = ", ".join(f"{k}={v}" for k, v in facts.torch_flags.items())
    return Finding(
        "environment", "info", MACHINE, "what this machine offers",
        f"torch {facts.torch_version}; {gpus or 'no CUDA GPU'}; torch's defaults in a fresh process: {flags}",
    )  # fmt: skip


def run_checks(facts: Facts) -> list[Finding]:
    findings = [environment(facts)]
    for dep in facts.deployments:
        findings += [check(dep, facts) for check in DEPLOYMENT_CHECKS]
    findings += [check_nccl(facts), check_gpu_placement(facts), check_mps(facts), check_shared_params(facts)]
    findings += check_streaming(facts) + check_batching(facts)
    return findings
