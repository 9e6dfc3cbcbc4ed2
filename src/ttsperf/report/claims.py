"""The guide's claims next to what the inputs measured — only claims whose measured value is in
the inputs, each quoted with the guide's line (tests/fixtures/shared/seed/000_28de64d92baf2491.txt;
the full list with commands is docs/CLAIMS.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttsperf.facts import STEPS_PER_AUDIO_SECOND
from ttsperf.i18n import N_, _
from ttsperf.report.document import Section, Table
from ttsperf.report.inputs import Inputs
from ttsperf.report.model_sections import baseline


@dataclass(frozen=True)
class Claim:
    line: int
    quote: str  # the guide's words, verbatim
    says: str  # what that means as a number, in English (N_: translated where shown)

    def where(self) -> str:
        return _("line {n}: 「{quote}」").format(n=self.line, quote=self.quote)


PARAMS = Claim(7, "一次性加载 1.1 B 参数", N_("1.1 B parameters"))
GPT_SHARE = Claim(
    5, "Transformer 解码器占了 70% 以上的权重", N_("the Transformer decoder holds over 70% of the weights")
)
FP16_WEIGHTS = Claim(7, "FP16 精度下约 2.2 GB", N_("about 2.2 GB of weights in FP16"))
PER_SECOND = Claim(
    8, "batch 里每增加 1 s 音频，激活值就膨胀 80 MB", N_("+80 MB per extra second of audio per batch element")
)
AMP = Claim(
    7, "PyTorch 默认会再开一份 master weight 做 AMP，于是显存直接翻倍", N_("autocast (AMP) doubles memory")
)
GRAD = Claim(
    32,
    "把requires_grad全关，再套torch.cuda.amp.autocast(dtype=torch.float16)，显存还能省 20%",
    N_("requires_grad off + autocast fp16 saves 20% memory"),
)
CKPT = Claim(
    25,
    "梯度检查点 + 激活重算，可把显存峰值从 19 GB 压到 12 GB",
    N_("checkpointing: peak 19 GB -> 12 GB (-37%)"),
)
TF32 = Claim(31, "allow_tf32 = True，Tensor Core 利用率能再提 8%", N_("TF32 on: +8% tensor-core use"))
CUDNN = Claim(
    43,
    "cudnn.benchmark = False ... 4090 的 FP16 算力直接掉 18%",
    N_("cudnn.benchmark off: -18% FP16 compute"),
)
SCRIPT = Claim(
    49, "Throughput: {REQUESTS/sum(latencies):.1f} req/s", N_("throughput = requests / sum of latencies")
)


def _row(claim: Claim, measured: str, verdict: str, source: Path) -> list[str]:
    return [_(claim.says), claim.where(), measured, verdict, str(source)]


def _ratio_verdict(measured: float, claimed: float) -> str:
    r = measured / claimed
    if 0.8 <= r <= 1.25:
        return _("consistent (measured {r}x the guide's)").format(r=f"{r:.2f}")
    if r < 1:
        return _("wrong: the guide's figure is {r}x too high").format(r=f"{1 / r:.1f}")
    return _("wrong: the guide's figure is {r}x too low").format(r=f"{r:.1f}")


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
                _("{n} parameters ({b} B), counted from the weights").format(
                    n=f"{total:,}", b=f"{total / 1e9:.2f}"
                ),
                _ratio_verdict(total, 1.1e9),
                path,
            )
        )
        if "gpt" in params:
            share = params["gpt"] / total
            verdict = (
                _("consistent")
                if share >= 0.7
                else _("not quite: {share} is the GPT (LLaMA) alone").format(share=f"{share:.1%}")
            )
            measured = _("GPT {gpt} of {total} = {share}").format(
                gpt=f"{params['gpt']:,}", total=f"{total:,}", share=f"{share:.1%}"
            )
            rows.append(_row(GPT_SHARE, measured, verdict, path))
        w = prof.weights_bytes.value
        per_param = w / total
        fp16 = w / 2 if prof.model.dtype == "fp32" else w  # the same parameters at 2 bytes each
        rows.append(
            _row(
                FP16_WEIGHTS,
                _("{gb} GB in {dtype} ({per} B/parameter)").format(
                    gb=f"{w / 1e9:.2f}", dtype=prof.model.dtype, per=f"{per_param:.1f}"
                )
                + (
                    ""
                    if prof.model.dtype != "fp32"
                    else _("; {gb} GB at 2 B/parameter").format(gb=f"{fp16 / 1e9:.2f}")
                ),
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
        how = _(
            "memory at batch {batch}: {hi} MB at {hi_ctx} tokens vs {lo} MB at {lo_ctx} = "
            "{per} B per token per row"
        ).format(
            batch=lo.batch,
            hi=f"{hi.peak_bytes.value / 1e6:,.0f}",
            hi_ctx=hi.context,
            lo=f"{lo.peak_bytes.value / 1e6:,.0f}",
            lo_ctx=lo.context,
            per=f"{per_token:,.0f}",
        )
    else:
        per_token = prof.kv_bytes_per_token.value
        how = _("KV cache {per} B per token per sequence").format(per=f"{per_token:,.0f}")
    per_s = per_token * STEPS_PER_AUDIO_SECOND
    said = _("{mb} MB per audio second per sequence in {dtype} ({how}, x {steps} steps/s)").format(
        mb=f"{per_s / 1e6:.2f}", dtype=prof.model.dtype, how=how, steps=STEPS_PER_AUDIO_SECOND
    )
    return said, _ratio_verdict(per_s, 80e6)


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
                    _("peak {p} MB with autocast vs {bp} MB without ({d})").format(
                        p=f"{p:,.0f}", bp=f"{bp:,.0f}", d=f"{d:+.0%}"
                    ),
                    _("wrong: no doubling") if d < 0.5 else _("consistent"),
                    path,
                )
            )
        if (p := peak("grad enabled, weights require grad")) is not None:
            saved = 1 - bp / p
            rows.append(
                _row(
                    GRAD,
                    _("grad on: peak {p} MB; inference_mode: {bp} MB ({saved} less)").format(
                        p=f"{p:,.0f}", bp=f"{bp:,.0f}", saved=f"{saved:.0%}"
                    ),
                    _("right direction") if saved > 0 else _("no saving measured"),
                    path,
                )
            )
        if (p := peak("activation checkpointing")) is not None:
            d = p / bp - 1
            rows.append(
                _row(
                    CKPT,
                    _("peak {p} MB with checkpointing vs {bp} MB ({d})").format(
                        p=f"{p:,.0f}", bp=f"{bp:,.0f}", d=f"{d:+.0%}"
                    ),
                    _("wrong for inference: no saving") if d > -0.1 else _("saves memory"),
                    path,
                )
            )
        if (s := step("TF32 off")) is not None:
            rows.append(
                _row(
                    TF32,
                    _("step {s} ms with TF32 off vs {bs} ms on ({d})").format(
                        s=f"{s:.2f}", bs=f"{bs:.2f}", d=f"{s / bs - 1:+.0%}"
                    ),
                    _("measured"),
                    path,
                )
            )
        if (s := step("cudnn.benchmark off")) is not None:
            rows.append(
                _row(
                    CUDNN,
                    _("step {s} ms with benchmark off vs {bs} ms on ({d})").format(
                        s=f"{s:.2f}", bs=f"{bs:.2f}", d=f"{s / bs - 1:+.0%}"
                    ),
                    _("measured"),
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
                _(
                    "at {load}: requests / sum(latencies) = {naive} req/s; successes / window = {rps} req/s"
                ).format(load=p.label, naive=f"{p.naive_throughput_rps:.3g}", rps=f"{p.throughput_rps:.3g}"),
                _(
                    "the guide's formula is {r}x low here "
                    "(it is 1 / mean latency, low by about the concurrency)"
                ).format(r=f"{p.throughput_rps / p.naive_throughput_rps:.1f}"),
                path,
            )
        )
    return rows


def claims_section(inputs: Inputs) -> Section | None:
    rows = _profile_rows(inputs) + _opt_rows(inputs) + _bench_rows(inputs)
    if not rows:
        return None
    sources = sorted({Path(r[-1]) for r in rows}, key=str)
    sec = Section(_("The guide's claims vs measured"), sources)
    sec.say(
        _(
            "Only the claims these inputs measure; the guide is "
            "tests/fixtures/shared/seed/000_28de64d92baf2491.txt (quoted with its line), "
            "the full list with commands is docs/CLAIMS.md. "
            "The guide's figures are for a GPU in FP16; "
            "where an input was measured elsewhere, the row says so."
        )
    )
    headers = [_("the guide says"), _("where"), _("measured"), _("verdict"), _("from")]
    sec.blocks.append(Table(headers, rows))
    return sec
