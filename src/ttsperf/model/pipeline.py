"""Text -> 24 kHz waveform: prompt, prefill, autoregressive decode of 4 codebooks, mel, vocoder.

This is the one-batch pipeline (`ttsperf synth`, conformance, profiling building blocks); serving
with continuous batching lives in `ttsperf.engine` and reuses the pieces here. Both decode with
the same step (model/step.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ttsperf.errors import UserError
from ttsperf.model.config import ModelConfig
from ttsperf.model.device import DTYPES, resolve_device, resolve_dtype  # noqa: F401  (DTYPES: benchmarks/)
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.length import LengthSource, SpeechRate
from ttsperf.model.sampling import RowParams, SamplingParams, candidates, row_seeds, seed_key, width
from ttsperf.model.spec import ModelSpec
from ttsperf.model.step import Rows, Step, advance
from ttsperf.model.tokenizer import Tokenizer, build_synthetic_tokenizer, load_tokenizer
from ttsperf.model.weights import ChatTTSModel, build_model, load_assets


@dataclass
class Generation:
    """One sequence's decode: its codes (T, num_vq), the hidden states that produced them (T, H)."""

    codes: torch.Tensor
    hidden: torch.Tensor
    length_source: LengthSource

    @property
    def steps(self) -> int:
        return int(self.codes.shape[0])


@dataclass
class SynthResult:
    wav: np.ndarray
    sample_rate: int
    steps: int
    wall_seconds: float
    length_source: LengthSource
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def audio_seconds(self) -> float:
        return len(self.wav) / self.sample_rate

    @property
    def rtf(self) -> float:
        """Wall seconds per audio second: < 1 is faster than real time."""
        return self.wall_seconds / self.audio_seconds if self.audio_seconds else float("inf")


class Pipeline:
    def __init__(
        self,
        model: ChatTTSModel,
        tokenizer: Tokenizer,
        *,
        synthetic: bool,
        device: str = "cpu",
        dtype: str = "fp32",
        speech_rate: SpeechRate | None = None,
    ):
        self.cfg: ModelConfig = model.cfg
        self.synthetic = synthetic
        self.device = torch.device(resolve_device(device))
        self.dtype_name = dtype
        # Counted before folding: the checkpoint's numbers (folding drops each head's weight_g).
        self.checkpoint_parameters = model.parameter_counts()
        model.embed.fold_weight_norm()
        self.model = model.to(device=self.device, dtype=resolve_dtype(dtype)).eval()
        self.tokenizer = tokenizer
        self.speech_rate = speech_rate or SpeechRate()

    @classmethod
    def synthetic_model(cls, cfg: ModelConfig, *, seed: int = 0, **kw) -> Pipeline:
        tok = Tokenizer(build_synthetic_tokenizer(cfg.gpt.num_text_tokens))
        return cls(build_model(cfg, seed=seed), tok, synthetic=True, **kw)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> Pipeline:
        """The model a ModelSpec names (the model flags of serve, synth, profile, export)."""
        cfg = spec.model_config()
        if spec.synthetic:
            return cls.synthetic_model(cfg, seed=spec.seed, device=spec.device, dtype=spec.dtype)
        return cls.from_assets(cfg, spec.assets, device=spec.device, dtype=spec.dtype)

    @classmethod
    def from_assets(cls, cfg: ModelConfig, directory: str | Path, **kw) -> Pipeline:
        model = load_assets(cfg, directory)
        tok = Tokenizer(load_tokenizer(Path(directory) / "tokenizer"))
        if tok.len != cfg.gpt.num_text_tokens:
            raise UserError(
                f"{Path(directory) / 'tokenizer'}: {tok.len} entries, expected {cfg.gpt.num_text_tokens}"
                f" for --config {cfg.name}"
            )
        return cls(model, tok, synthetic=False, **kw)

    # ------------------------------------------------------------ GPT

    def prompt(self, texts: list[str], prompt: str = "[speed_5]") -> tuple[torch.Tensor, ...]:
        decorated = [self.tokenizer.decorate_code_prompt(t, prompt) for t in texts]
        ids, attn, text_mask = self.tokenizer.encode(decorated, self.cfg.gpt.num_vq)
        return ids, attn.long(), text_mask  # on the host: Step.prefill sends them with the rest

    def prompt_of_ids(self, ids: list[int]) -> tuple[torch.Tensor, ...]:
        """`prompt` of one decorated text tokenized already (Tokenizer.ids): the same tensors."""
        ids_, attn, text_mask = self.tokenizer.encode_ids([ids], self.cfg.gpt.num_vq)
        return ids_, attn.long(), text_mask

    @torch.inference_mode()
    def generate(
        self,
        texts: list[str],
        params: SamplingParams | None = None,
        *,
        max_new_tokens: int = 2048,
        fixed_steps: list[int] | None = None,
        fixed_length: bool = False,
        prompt: str = "[speed_5]",
        on_step: Callable[[int, int], None] | None = None,
    ) -> list[Generation]:
        """Decode a static batch. Lengths come from EOS, or from the speech-rate model when the
        weights are synthetic (random weights never emit EOS) or `fixed_length` is asked for;
        `fixed_steps` gives the lengths directly (tests, conformance)."""
        params = params or SamplingParams()
        if not texts:
            raise UserError("no text given: expected at least one non-empty text")
        forced = fixed_steps
        capped = [False] * len(texts)  # the speech-rate length was longer than max_new_tokens
        if forced is None and (self.synthetic or fixed_length):
            wanted = [self.speech_rate.steps(t) for t in texts]
            forced = [min(n, max_new_tokens) for n in wanted]
            capped = [n > max_new_tokens for n in wanted]
        limits = forced or [max_new_tokens] * len(texts)
        g, b = self.cfg.gpt, len(texts)
        # Each row is prefilled alone into its own KV slot and decodes at its own position: no
        # padding, so a row's output does not depend on the other rows of the batch.
        prompts = [self.prompt([t], prompt) for t in texts]
        lengths = [ids.shape[1] for ids, _, _ in prompts]
        dtype = next(self.model.gpt.parameters()).dtype
        slots = KVSlots(
            g.num_hidden_layers, b, g.num_key_value_heads, max(lengths) + max(limits),
            g.hidden_size // g.num_attention_heads, dtype=dtype, device=self.device,
        )  # fmt: skip
        step = Step(self.model.embed, SlotForward(self.model.gpt), slots)
        hidden = torch.cat([step.prefill([p], r) for r, p in enumerate(prompts)])
        # The engine's decode step and state (model/step.py). Row i draws from seed + i: the
        # engine's stateless generator, so a seeded request gives the same codes here as in the
        # engine (row 0 of a batch is the request alone).
        rows = Rows(b, g.num_vq, g.hidden_size, max(limits), g.eos_token, self.device)
        keys = seed_key(row_seeds([params.seed + i if params.seed is not None else None for i in range(b)]))
        params_b = RowParams.of([params] * b, g.num_audio_tokens)
        rows.put(slice(0, b), lengths, limits, [forced is not None] * b, keys, params_b)
        top = width(candidates(params, g.num_audio_tokens), g.num_audio_tokens)
        rows.accept(slice(0, b), hidden, self.model.embed.code_logits(hidden), top)
        sampled = [rows.codes.clone()]  # a row takes a code every step until it stops
        for n in range(1, max(limits) + 1):
            if on_step is not None:
                on_step(n, max(limits))
            if not bool((~rows.done & (rows.steps < rows.limits)).any()):
                break
            advance(step, rows, b, max(lengths) + n, top)
            sampled.append(rows.codes.clone())
        taken, eos_seen = rows.steps.tolist(), rows.done.tolist()
        codes = torch.stack(sampled, dim=1)  # (B, steps, num_vq)

        def source(r: int) -> LengthSource:
            if forced is not None:
                return "max-new-tokens" if capped[r] else "speech-rate"
            return "eos" if eos_seen[r] else "max-new-tokens"

        return [
            Generation(
                codes=codes[r, : taken[r]].clone(),
                hidden=rows.hidden[r, : taken[r]].clone(),
                length_source=source(r),
            )
            for r in range(b)
        ]

    # ------------------------------------------------------------ audio

    @torch.inference_mode()
    def mel(self, gen: Generation, use_decoder: bool = True) -> torch.Tensor:
        """(1, 100, 2T) mel of one sequence: Decoder on hidden states (default) or DVAE on codes."""
        dtype = next(self.model.decoder.parameters()).dtype
        if use_decoder:
            return self.model.decoder(gen.hidden.T.unsqueeze(0).to(self.device, dtype))
        return self.model.dvae(gen.codes.T.unsqueeze(0).to(self.device))

    @torch.inference_mode()
    def vocode(self, mel: torch.Tensor) -> np.ndarray:
        dtype = next(self.model.vocos.parameters()).dtype
        return self.model.vocos(mel.to(dtype)).float().squeeze(0).cpu().numpy()

    def synthesize(
        self,
        text: str,
        params: SamplingParams | None = None,
        *,
        max_new_tokens: int = 2048,
        fixed_length: bool = False,
        use_decoder: bool = True,
        on_step: Callable[[int, int], None] | None = None,
    ) -> SynthResult:
        t0 = time.perf_counter()
        gen = self.generate(
            [text], params, max_new_tokens=max_new_tokens, fixed_length=fixed_length, on_step=on_step
        )[0]
        t1 = time.perf_counter()
        if gen.steps == 0:
            wav = np.zeros(0, dtype=np.float32)
        else:
            wav = self.vocode(self.mel(gen, use_decoder))
        t2 = time.perf_counter()
        return SynthResult(
            wav=wav,
            sample_rate=self.cfg.sample_rate,
            steps=gen.steps,
            wall_seconds=t2 - t0,
            length_source=gen.length_source,
            timings={"gpt_seconds": t1 - t0, "decoder_vocoder_seconds": t2 - t1},
        )
