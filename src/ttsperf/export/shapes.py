"""TensorRT optimisation-profile shapes: parse trtexec's flags, check a workload against them, and
derive them from a workload.

The guide's first pitfall: an engine built for one token length rejects the next text (`--optShapes`
of 9 tokens, a 12-token text fails). A TensorRT engine accepts only inputs within its profile's
[min, max] per dimension and is tuned for `opt`. So the shapes must come from the workload: each
text's prompt tokens (ttsperf's tokenizer) and decode steps (ttsperf's length model) give the
prompt length a prefill sees and the KV context every decode step sees.

Each known input name has a role per dimension (`ROLES`); fixed roles (layers, heads, ...) must
equal the model's value. Pure functions: no torch, no model; the caller counts tokens.

    spec = parse_spec("--minShapes=input_ids:1x1 --optShapes=input_ids:4x20 --maxShapes=input_ids:8x50")
    check = check_spec(spec, requests, CHATTTS.gpt)   # which requests fall outside
    recommend(requests, CHATTTS.gpt, max_batch=8).flags()
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ttsperf.errors import UserError
from ttsperf.model.config import GPTConfig

FLAGS = ("minShapes", "optShapes", "maxShapes")
EXPECTED = (
    "expected --minShapes=NAME:DIMS --optShapes=NAME:DIMS --maxShapes=NAME:DIMS "
    "with DIMS like 1x20 (several inputs comma-separated), as trtexec takes them"
)

# What each dimension of a known input means. `input_ids` etc. are a prefill's (the guide's engine,
# ChatTTS's (B, T, num_vq) ids; a 2-D (B, T) form uses the first two); the rest are the inputs of
# ttsperf's exported decode step (export/gpt_step.py).
ROLES: dict[str, tuple[str, ...]] = {
    "input_ids": ("batch", "prompt", "num_vq"),
    "attention_mask": ("batch", "prompt"),
    "text_mask": ("batch", "prompt"),
    "inputs_embeds": ("batch", "prompt", "hidden"),
    "codes": ("batch", "num_vq"),
    "positions": ("batch",),
    "past_keys": ("layers", "batch", "kv_heads", "context", "head_dim"),
    "past_values": ("layers", "batch", "kv_heads", "context", "head_dim"),
}
STEP_INPUTS = ("codes", "positions", "past_keys", "past_values")


def fixed_dims(g: GPTConfig) -> dict[str, int]:
    return {
        "num_vq": g.num_vq,
        "hidden": g.hidden_size,
        "layers": g.num_hidden_layers,
        "kv_heads": g.num_key_value_heads,
        "head_dim": g.hidden_size // g.num_attention_heads,
    }


@dataclass(frozen=True)
class ShapeSpec:
    """name -> (min, opt, max) dims, in the order given."""

    inputs: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]

    def flags(self) -> str:
        parts = []
        for i, flag in enumerate(FLAGS):
            dims = ",".join(f"{name}:{'x'.join(map(str, s[i]))}" for name, s in self.inputs.items())
            parts.append(f"--{flag}={dims}")
        return " ".join(parts)


# trtexec builds in fp32 unless told it may use a narrower type; the ONNX graph itself stays fp32
PRECISION_FLAGS = {"fp32": "", "fp16": " --fp16", "bf16": " --bf16"}


def trtexec_command(onnx: str | Path, spec: ShapeSpec, dtype: str, engine: str | Path | None = None) -> str:
    """The trtexec line that builds an engine for `spec` running in `dtype` (fp32 | fp16 | bf16)."""
    if dtype not in PRECISION_FLAGS:
        raise UserError(f"--dtype {dtype!r}: expected one of {', '.join(PRECISION_FLAGS)}")
    save = f" --saveEngine={engine}" if engine else ""
    return f"trtexec --onnx={onnx} {spec.flags()}{PRECISION_FLAGS[dtype]}{save}"


def parse_spec(text: str, where: str = "--trt-shapes") -> ShapeSpec:
    """trtexec's three flags -> ShapeSpec; anything wrong is one UserError naming the bad part."""
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"{where} {text!r}: {exc}; {EXPECTED}") from None
    found: dict[str, dict[str, tuple[int, ...]]] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        flag, eq, value = tok.partition("=")
        name = flag.lstrip("-")
        if not flag.startswith("--") or name not in FLAGS:
            raise UserError(f"{where}: unexpected {tok!r}; {EXPECTED}")
        if not eq:  # "--minShapes VALUE"
            if i + 1 >= len(tokens):
                raise UserError(f"{where}: {flag} has no value; {EXPECTED}")
            i, value = i + 1, tokens[i + 1]
        if name in found:
            raise UserError(f"{where}: {flag} given twice; {EXPECTED}")
        found[name] = _parse_shapes(value, f"{where}: --{name}")
        i += 1
    for name in FLAGS:
        if name not in found:
            raise UserError(f"{where}: --{name} is missing; {EXPECTED}")
    return _combine(found, where)


def _parse_shapes(value: str, where: str) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for part in value.split(","):
        name, colon, dims = part.strip().rpartition(":")
        name = name.strip("'\"")
        if not colon or not name or not dims:
            raise UserError(f"{where} {part!r}: expected NAME:DIMS, e.g. input_ids:1x20")
        values = []
        for d in dims.split("x"):
            if not d.isdigit() or int(d) < 1:
                raise UserError(
                    f"{where} {part!r}: dimension {d!r} is not a positive integer; expected DIMS like 1x20"
                )
            values.append(int(d))
        if name in shapes:
            raise UserError(f"{where}: input {name!r} given twice; expected each input once")
        shapes[name] = tuple(values)
    return shapes


def _combine(found: dict[str, dict[str, tuple[int, ...]]], where: str) -> ShapeSpec:
    names = list(found["minShapes"])
    for flag in FLAGS[1:]:
        if set(found[flag]) != set(names):
            diff = sorted(set(names) ^ set(found[flag]))
            raise UserError(f"{where}: input(s) {', '.join(diff)} not in all three flags; {EXPECTED}")
    inputs = {}
    for name in names:
        lo, opt, hi = (found[f][name] for f in FLAGS)
        if not len(lo) == len(opt) == len(hi):
            raise UserError(
                f"{where}: {name} has {len(lo)}/{len(opt)}/{len(hi)} dimensions in min/opt/max; "
                "expected the same number in all three"
            )
        for d, (a, b, c) in enumerate(zip(lo, opt, hi, strict=True)):
            if not a <= b <= c:
                raise UserError(
                    f"{where}: {name} dimension {d}: min {a}, opt {b}, max {c}; expected min <= opt <= max"
                )
        inputs[name] = (lo, opt, hi)
    return ShapeSpec(inputs)


@dataclass(frozen=True)
class RequestShape:
    """One text's sizes: prompt tokens a prefill sees, decode steps it takes."""

    text: str
    prompt_tokens: int
    steps: int

    @property
    def contexts(self) -> tuple[int, int]:
        """KV slot lengths its decode steps pass (position + 1): first and last."""
        return self.prompt_tokens + 1, self.prompt_tokens + self.steps


def roles(name: str, rank: int) -> tuple[str, ...] | None:
    known = ROLES.get(name)
    if known is None or rank > len(known) or (rank < len(known) and name != "input_ids"):
        return None
    return known[:rank]


@dataclass
class SpecCheck:
    outside: list[tuple[RequestShape, list[str]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # fixed dims that cannot match, batch limits
    unknown: list[str] = field(default_factory=list)  # inputs whose dimensions we cannot interpret
    checked: list[str] = field(default_factory=list)  # "input_ids dim 1 (prompt): 1..50"


def check_spec(
    spec: ShapeSpec, requests: list[RequestShape], g: GPTConfig, max_batch: int | None = None
) -> SpecCheck:
    """Which requests fall outside `spec`, and which dimensions can never match this model."""
    out = SpecCheck()
    fixed = fixed_dims(g)
    reasons: list[list[str]] = [[] for _ in requests]
    for name, (lo, _, hi) in spec.inputs.items():
        dims = roles(name, len(lo))
        if dims is None:
            out.unknown.append(f"{name} ({len(lo)} dims)")
            continue
        for d, role in enumerate(dims):
            a, b = lo[d], hi[d]
            out.checked.append(f"{name} dim {d} ({role}): {a}..{b}")
            if role in fixed and not a <= fixed[role] <= b:
                out.problems.append(f"{name} dim {d} ({role}) allows {a}..{b}, the model has {fixed[role]}")
            elif role == "batch":
                if a > 1:
                    out.problems.append(
                        f"{name} dim {d} (batch) starts at {a}: a lone request (batch 1) fails"
                    )
                if max_batch is not None and b < max_batch:
                    out.problems.append(
                        f"{name} dim {d} (batch) ends at {b}, the server batches up to {max_batch}"
                    )
            elif role in ("prompt", "context"):
                for i, r in enumerate(requests):
                    first, last = (r.prompt_tokens, r.prompt_tokens) if role == "prompt" else r.contexts
                    if first < a or last > b:
                        need = str(first) if first == last else f"{first}..{last}"
                        reasons[i].append(f"{name} {role} {need} outside {a}..{b}")
    out.outside = [(r, why) for r, why in zip(requests, reasons, strict=True) if why]
    return out


def _round_up(n: float, to: int) -> int:
    return int(math.ceil(n / to) * to)


def length_stats(requests: list[RequestShape]) -> dict[str, dict[str, int]]:
    """Percentiles of prompt tokens (one per request) and of KV context (one per decode step)."""
    prompts = np.array([r.prompt_tokens for r in requests])
    contexts = np.concatenate([np.arange(r.contexts[0], r.contexts[1] + 1) for r in requests])
    stats = {}
    for name, values in (("prompt", prompts), ("context", contexts)):
        stats[name] = {
            "min": int(values.min()),
            **{f"p{p}": int(np.ceil(np.percentile(values, p))) for p in (50, 90, 99)},
            "max": int(values.max()),
        }
    return stats


def recommend(
    requests: list[RequestShape],
    g: GPTConfig,
    *,
    max_batch: int = 8,
    inputs: dict[str, int] | None = None,
) -> ShapeSpec:
    """Shapes to build with: min 1 (shorter inputs cost nothing to allow), opt the workload's median
    (what TensorRT tunes its kernels for; the median decode step's context for the step graph),
    max the workload's longest rounded up to a multiple of 16 (at most the model's positions);
    batch 1 / half of `max_batch` (the guide's 4 of 8) / `max_batch`.

    `inputs` maps input name -> rank (default: the decode step's inputs); unknown names are left out.
    """
    if not requests:
        raise UserError("no requests: expected a workload of at least one text")
    stats = length_stats(requests)
    cap = g.max_position_embeddings  # rotary positions past it were never trained
    ranges = {
        "batch": (1, max(1, max_batch // 2), max_batch),
        **{k: (1, min(s["p50"], cap), min(_round_up(s["max"], 16), cap)) for k, s in stats.items()},
        **{k: (v, v, v) for k, v in fixed_dims(g).items()},
    }
    wanted = inputs or {name: len(ROLES[name]) for name in STEP_INPUTS}
    spec = {}
    for name, rank in wanted.items():
        dims = roles(name, rank)
        if dims is None:
            continue
        spec[name] = tuple(tuple(ranges[role][i] for role in dims) for i in range(3))
    return ShapeSpec(spec)  # type: ignore[arg-type]


def workload_requests(
    texts: list[str], tokenizer, speech_rate=None, max_new_tokens: int = 2048
) -> list[RequestShape]:
    """Each text's prompt tokens (the official code prompt, through `tokenizer`) and decode steps
    (ttsperf's speech-rate length model, capped at `max_new_tokens`)."""
    from ttsperf.model.length import SpeechRate

    rate = speech_rate or SpeechRate()
    return [
        RequestShape(
            text,
            len(tokenizer.ids(tokenizer.decorate_code_prompt(text))),
            min(rate.steps(text), max_new_tokens),
        )
        for text in texts
    ]


def load_requests(
    texts: str | None, text_set: str | None, g: GPTConfig, assets: str | None = None
) -> tuple[str, list[RequestShape]]:
    """The workload `--texts FILE` / `--text-set NAME` names (default: every built-in text), counted
    with the asset dir's tokenizer or ttsperf's synthetic one of the config's size."""
    from pathlib import Path

    from ttsperf.bench.texts import load_workload
    from ttsperf.model.tokenizer import Tokenizer

    workload = load_workload(texts, text_set or "mixed")
    if assets:
        tok, source = Tokenizer.from_dir(Path(assets) / "tokenizer"), f"{assets}'s tokenizer"
    else:
        # its vocabulary has no English wordpieces: English counts letters, more tokens than the real one
        tok, source = Tokenizer.synthetic(g.num_text_tokens), "ttsperf's synthetic tokenizer"
    return f"{workload.name} ({source})", workload_requests([it.text for it in workload.items], tok)
