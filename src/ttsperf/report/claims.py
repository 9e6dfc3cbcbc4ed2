"""The guide's claims next to what the inputs measured — only claims whose measured value is in
the inputs, each quoted with the guide's line (tests/fixtures/shared/seed/000_28de64d92baf2491.txt;
the full list with commands is docs/CLAIMS.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttsperf.facts import STEPS_PER_AUDIO_SECOND
from ttsperf.report.document import Section, Table
from ttsperf.report.inputs import Inputs
from ttsperf.report.model_sections import baseline


@dataclass(frozen=True)
class Claim:
    line: int
    quote: str  # the guide's words, verbatim
    says: str  # what that means as a number, in English

    def where(self) -> str:
        return f"line {self.line}: 「{self.quote}」"


PARAMS = Claim(7, "一次性加载 1.1 B 参数", "1.1 B parameters")
GPT_SHARE = Claim(
    5, "Transformer 解码器占了 70% 以上的权重", "the Transformer decoder holds over 70% of the weights"
)
FP16_WEIGHTS = Claim(7, "FP16 精度下约 2.2 GB", "about 2.2 GB of weights in FP16")
PER_SECOND = Claim(
    8, "batch 里每增加 1 s 音频，激活值就膨胀 80 MB", "+80 MB per extra second of audio per batch element"
)
AMP = Claim(
    7, "PyTorch 默认会再开一份 master weight 做 AMP，于是显存直接翻倍", "autocast (AMP) doubles memory"
)
GRAD = Claim(
    32,
    "把requires_grad全关，再套torch.cuda.amp.autocast(dtype=torch.float16)，显存还能省 20%",
    "requires_grad off + autocast fp16 saves 20% memory",
)
CKPT = Claim(
    25, "梯度检查点 + 激活重算，可把显存峰值从 19 GB 压到 12 GB", "checkpointing: peak 19 GB -> 12 GB (-37%)"
)
TF32 = Claim(31, "allow_tf32 = True，Tensor Core 利用率能再提 8%", "TF32 on: +8% tensor-core use")
CUDNN = Claim(
    43, "cudnn.benchmark = False ... 4090 的 FP16 算力直接掉 18%", "cudnn.benchmark off: -18% FP16 compute"
)
SCRIPT = Claim(
    49, "Throughput: {REQUESTS/sum(latencies):.1f} req/s", "throughput = requests / sum of latencies"
)


def _row(claim: Claim, measured: str, verdict: str, source: Path) -> list[str]:
    return [claim.says, claim.where(), measured, verdict, str(source)]


def _ratio_verdict(measured: float, claimed: float) -> str:
    r = measured / claimed
    if 0.8 <= r <= 1.25:
        return f"consistent (measured {r:.2f}x the guide's)"
    return (
        f"wrong: the guide's figure is {1 / r:.1f}x too high"
        if r < 1
        else (f"wrong: the guide's figure is {r:.1f}x too low")
    )


def _profile_rows(inputs: Inputs) -> list[list[str]]:
    rows = []
    for path, prof in inputs.profiles:
        if prof.model.config != "chattts":
            continue  # the tiny test config says nothing about ChatTTS's size
        params = prof.model.parameters
        total = params.get("total") or sum(params.values())
        rows.append(
            _row(
                PARAMS,
                f"{total:,} parameters ({total / 1e9:.2f} B), counted from the weights",
                _ratio_verdict(total, 1.1e9),
                path,
            )
        )
        if "gpt" in params:
            share = params["gpt"] / total
            verdict = "consistent" if share >= 0.7 else f"not quite: {share:.1%} is the GPT (LLaMA) alone"
            rows.append(_row(GPT_SHARE, f"GPT {params['gpt']:,} of {total:,} = {share:.1%}", verdict, path))
        w = prof.weights_bytes.value
        per_param = w / total
        fp16 = w / 2 if prof.model.dtype == "fp32" else w  # the same parameters at 2 bytes each
        rows.append(
            _row(
                FP16_WEIGHTS,
                f"{w / 1e9:.2f} GB in {prof.model.dtype} ({per_param:.1f} B/parameter)"
                + ("" if prof.model.dtype != "fp32" else f"; {fp16 / 1e9:.2f} GB at 2 B/parameter"),
                _ratio_verdict(fp16, 2.2e9),
                path,
            )
        )
        rows.append(_row(PER_SECOND, *_per_second(prof), path))
    return rows


def _per_second(prof) -> tuple[str, str]:
    """Growth per audio second per sequence: from memory at two contexts when measured, else KV/token."""
    by_batch: dict[int, list] = {}
    for p in prof.memory:
        by_batch.setdefault(p.batch, []).append(p)
    best = max((pts for pts in by_batch.values() if len(pts) > 1), key=lambda pts: pts[0].batch, default=None)
    if best:
        lo, hi = min(best, key=lambda p: p.context), max(best, key=lambda p: p.context)
        per_token = (hi.peak_bytes.value - lo.peak_bytes.value) / ((hi.context - lo.context) * lo.batch)
        how = (
            f"memory at batch {lo.batch}: {hi.peak_bytes.value / 1e6:,.0f} MB at {hi.context} tokens vs "
            f"{lo.peak_bytes.value / 1e6:,.0f} MB at {lo.context} = {per_token:,.0f} B per token per row"
        )
    else:
        per_token = prof.kv_bytes_per_token.value
        how = f"KV cache {per_token:,.0f} B per token per sequence"
    per_s = per_token * STEPS_PER_AUDIO_SECOND
    return (
        f"{per_s / 1e6:.2f} MB per audio second per sequence in {prof.model.dtype} ({how}, x "
        f"{STEPS_PER_AUDIO_SECOND} steps/s)",
        _ratio_verdict(per_s, 80e6),
    )


def _opt_rows(inputs: Inputs) -> list[list[str]]:
    rows = []
    for path, table in inputs.optimizations:
        base = baseline(table)
        if base is None:
            continue
        by = {r["variant"]: r for r in table}

        def peak(name: str, _by=by) -> float | None:
            r = _by.get(name)
            return r["peak_MB"] if r and r.get("applies") else None

        def step(name: str, _by=by) -> float | None:
            r = _by.get(name)
            return r["step_ms"] if r and r.get("applies") else None

        bp, bs = base["peak_MB"], base["step_ms"]
        if (p := peak("autocast fp16/bf16 over fp32 weights")) is not None:
            d = p / bp - 1
            rows.append(
                _row(
                    AMP,
                    f"peak {p:,.0f} MB with autocast vs {bp:,.0f} MB without ({d:+.0%})",
                    "wrong: no doubling" if d < 0.5 else "consistent",
                    path,
                )
            )
        if (p := peak("grad enabled, weights require grad")) is not None:
            saved = 1 - bp / p
            rows.append(
                _row(
                    GRAD,
                    f"grad on: peak {p:,.0f} MB; inference_mode: {bp:,.0f} MB ({saved:.0%} less)",
                    "right direction" if saved > 0 else "no saving measured",
                    path,
                )
            )
        if (p := peak("activation checkpointing")) is not None:
            d = p / bp - 1
            rows.append(
                _row(
                    CKPT,
                    f"peak {p:,.0f} MB with checkpointing vs {bp:,.0f} MB ({d:+.0%})",
                    "wrong for inference: no saving" if d > -0.1 else "saves memory",
                    path,
                )
            )
        if (s := step("TF32 off")) is not None:
            rows.append(
                _row(
                    TF32,
                    f"step {s:.2f} ms with TF32 off vs {bs:.2f} ms on ({s / bs - 1:+.0%})",
                    "measured",
                    path,
                )
            )
        if (s := step("cudnn.benchmark off")) is not None:
            rows.append(
                _row(
                    CUDNN,
                    f"step {s:.2f} ms with benchmark off vs {bs:.2f} ms on ({s / bs - 1:+.0%})",
                    "measured",
                    path,
                )
            )
    return rows


def _bench_rows(inputs: Inputs) -> list[list[str]]:
    rows = []
    for path, run in inputs.bench:
        pts = [p for p in run.points if p.naive_throughput_rps is not None and p.throughput_rps > 0]
        if not pts:
            continue
        p = max(pts, key=lambda p: p.strategy.load)
        rows.append(
            _row(
                SCRIPT,
                f"at {p.label}: requests / sum(latencies) = {p.naive_throughput_rps:.3g} req/s; "
                f"successes / window = {p.throughput_rps:.3g} req/s",
                f"the guide's formula is {p.throughput_rps / p.naive_throughput_rps:.1f}x low here "
                "(it is 1 / mean latency, low by about the concurrency)",
                path,
            )
        )
    return rows


def claims_section(inputs: Inputs) -> Section | None:
    rows = _profile_rows(inputs) + _opt_rows(inputs) + _bench_rows(inputs)
    if not rows:
        return None
    sources = sorted({Path(r[-1]) for r in rows}, key=str)
    sec = Section("The guide's claims vs measured", sources)
    sec.say(
        "Only the claims these inputs measure; the guide is "
        "tests/fixtures/shared/seed/000_28de64d92baf2491.txt (quoted with its line), "
        "the full list with commands is docs/CLAIMS.md. "
        "The guide's figures are for a GPU in FP16; where an input was measured elsewhere, the row says so."
    )
    sec.blocks.append(Table(["the guide says", "where", "measured", "verdict", "from"], rows))
    return sec
