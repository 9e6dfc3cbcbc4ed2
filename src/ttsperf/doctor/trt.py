"""TensorRT shapes as findings: which requests of a workload an engine's profile rejects, and the
profile the workload asks for (printed as trtexec flags)."""

from __future__ import annotations

from ttsperf.doctor.checks import MACHINE, Finding
from ttsperf.export.shapes import (
    ROLES,
    RequestShape,
    ShapeSpec,
    check_spec,
    length_stats,
    recommend,
    trtexec_command,
)
from ttsperf.model.config import GPTConfig

_EXAMPLES = 3


def _short(text: str, n: int = 24) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def check_trt(
    spec: ShapeSpec | None,
    requests: list[RequestShape],
    workload: str,
    g: GPTConfig,
    max_batch: int,
    max_batch_from: str,
    dtype: str = "fp32",
) -> list[Finding]:
    stats = length_stats(requests)
    pct = {k: " / ".join(f"{p} {v}" for p, v in s.items()) for k, s in stats.items()}
    lengths = (
        f"workload {workload}: {len(requests)} texts; prompt tokens {pct['prompt']}; "
        f"KV context per decode step {pct['context']}"
    )
    title = "TensorRT shapes cover the workload (the guide's pitfall 1)"
    out: list[Finding] = []
    wanted = None
    if spec is None:
        out.append(
            Finding("trt-shapes", "skipped", MACHINE, title, "no --trt-shapes given", needs="--trt-shapes")
        )
    else:
        check = check_spec(spec, requests, g, max_batch if max_batch_from != "default" else None)
        wanted = {name: len(s[0]) for name, s in spec.inputs.items()}
        if check.unknown:
            out.append(
                Finding(
                    "trt-shapes-unknown",
                    "info",
                    MACHINE,
                    "TensorRT inputs ttsperf can interpret",
                    f"not interpreted: {', '.join(check.unknown)}; known: {', '.join(ROLES)} "
                    "(a prefill's and ttsperf export onnx's step inputs)",
                )
            )
        if check.outside or check.problems:
            bad = [
                f"{_short(r.text)!r} ({r.prompt_tokens} prompt tokens, {r.steps} steps): {'; '.join(why)}"
                for r, why in check.outside[:_EXAMPLES]
            ]
            more = f" (+{len(check.outside) - _EXAMPLES} more)" if len(check.outside) > _EXAMPLES else ""
            evidence = f"{len(check.outside)} of {len(requests)} requests fall outside {spec.flags()}"
            if bad:
                evidence += ": " + " | ".join(bad) + more
            if check.problems:
                evidence += "; " + "; ".join(check.problems)
            out.append(
                Finding(
                    "trt-shapes",
                    "error",
                    MACHINE,
                    title,
                    evidence,
                    "rebuild the engine with the shapes in trt-recommended",
                )
            )
        elif check.checked:
            within = f"all {len(requests)} requests within ({'; '.join(check.checked)})"
            out.append(Finding("trt-shapes", "ok", MACHINE, title, within))
        else:
            why = "no input of the spec is one ttsperf can interpret"
            out.append(Finding("trt-shapes", "skipped", MACHINE, title, why, needs="known input names"))
    rec = recommend(requests, g, max_batch=max_batch, inputs=wanted)
    if not rec.inputs:  # none of the spec's inputs is known: recommend for ttsperf's step graph
        rec = recommend(requests, g, max_batch=max_batch)
    out.append(
        Finding(
            "trt-recommended",
            "info",
            MACHINE,
            "TensorRT shapes to build with, from the workload",
            f"{lengths}; batch up to {max_batch} ({max_batch_from}); min 1, opt the median, "
            f"max the longest rounded up to 16; {dtype}",
            trtexec_command("MODEL.onnx", rec, dtype),
        )  # fmt: skip
    )
    return out
