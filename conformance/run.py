"""Conformance: ttsperf's ChatTTS against the official package, on the same random weights.

Run with `make conformance` (a separate venv holds chattts==0.2.5 and the torch/torchaudio pair it
needs). For each config, ttsperf writes a random asset dir; both implementations load it and run
identical inputs stage by stage; the per-stage max absolute and relative error is printed and the
run fails above 1e-4 relative (fp32). The official outputs for `tiny` are saved as a small fixture
(tests/fixtures/conformance_tiny.npz) that `make test` checks on every run without this venv.

The official package is AGPL: it is only imported and run here, never copied.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from ttsperf.model.assets import make_random_assets
from ttsperf.model.config import get_config
from ttsperf.model.conformance import STAGES, make_stage_inputs, ours_stage_outputs, rel_error

REL_TOL = 1e-4
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "conformance_tiny.npz"


def official_modules(cfg, root: Path):
    from ChatTTS.model import DVAE, GPT, Embed, Tokenizer
    from vocos import Vocos
    from vocos.feature_extractors import MelSpectrogramFeatures
    from vocos.heads import ISTFTHead
    from vocos.models import VocosBackbone

    g = cfg.gpt
    embed = Embed(g.hidden_size, g.num_audio_tokens, g.num_text_tokens, g.num_vq)
    embed.load_pretrained(str(root / "Embed.safetensors"), torch.device("cpu"))
    gpt_config = dict(
        hidden_size=g.hidden_size,
        intermediate_size=g.intermediate_size,
        num_attention_heads=g.num_attention_heads,
        num_hidden_layers=g.num_hidden_layers,
        use_cache=False,
        max_position_embeddings=g.max_position_embeddings,
        spk_emb_dim=192,
        spk_KL=False,
        num_audio_tokens=g.num_audio_tokens,
        num_text_tokens=g.num_text_tokens,
        num_vq=g.num_vq,
    )
    gpt = GPT(gpt_config=gpt_config, embed=embed, logger=logging.getLogger("official")).eval()
    gpt.load_pretrained(str(root / "gpt"), str(root / "Embed.safetensors"))

    def stack(c):
        return dict(idim=c.idim, odim=c.odim, hidden=c.hidden, n_layer=c.n_layer, bn_dim=c.bn_dim)

    decoder = DVAE(decoder_config=stack(cfg.decoder), dim=cfg.decoder.idim)
    decoder.load_pretrained(str(root / "Decoder.safetensors"), torch.device("cpu"))
    vq = dict(dim=cfg.vq.dim, levels=cfg.vq.levels, G=cfg.vq.groups, R=cfg.vq.residuals)
    dvae = DVAE(
        decoder_config=stack(cfg.dvae_decoder),
        encoder_config=stack(cfg.dvae_encoder),
        vq_config=vq,
        dim=cfg.dvae_decoder.idim,
    )
    dvae.load_pretrained(str(root / "DVAE.safetensors"), torch.device("cpu"))
    v = cfg.vocos
    vocos = Vocos(
        feature_extractor=MelSpectrogramFeatures(
            sample_rate=cfg.sample_rate, n_fft=v.n_fft, hop_length=v.hop_length
        ),
        backbone=VocosBackbone(
            input_channels=v.n_mels, dim=v.dim, intermediate_dim=v.intermediate_dim, num_layers=v.num_layers
        ),
        head=ISTFTHead(dim=v.dim, n_fft=v.n_fft, hop_length=v.hop_length, padding="center"),
    ).eval()
    from safetensors.torch import load_file

    vocos.load_state_dict(load_file(str(root / "Vocos.safetensors")))
    tokenizer = Tokenizer(str(root / "tokenizer"))
    return dict(
        gpt=gpt, embed=embed, decoder=decoder.eval(), dvae=dvae.eval(), vocos=vocos, tokenizer=tokenizer
    )


@torch.inference_mode()
def official_generate(cfg, off, text: str, steps: int, temperature: float, seed: int | None = None):
    """The official prompt and code generation for exactly `steps` steps (official default
    sampling otherwise): returns its GenerationOutputs (ids, hidden states)."""
    from ChatTTS.model import gen_logits
    from ChatTTS.model.speaker import Speaker

    decorated = Speaker.decorate_code_prompts([text], "[speed_5]", None, None)
    ids, attn, text_mask = off["tokenizer"].encode(decorated, cfg.gpt.num_vq)
    emb = off["embed"](ids, text_mask)
    warpers, processors = gen_logits(
        num_code=cfg.gpt.num_audio_tokens - 1, top_P=0.7, top_K=20, repetition_penalty=1.05
    )
    return next(
        off["gpt"].generate(
            emb, ids, temperature=torch.tensor([temperature] * cfg.gpt.num_vq), eos_token=cfg.gpt.eos_token,
            attention_mask=attn, max_new_token=steps, min_new_token=steps,
            logits_processors=(*processors, *warpers), return_hidden=True, show_tqdm=False,
            ensure_non_empty=False, manual_seed=seed,
        )
    )  # fmt: skip


@torch.inference_mode()
def official_stage_outputs(cfg, off, inputs: dict) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    ids = torch.from_numpy(inputs["gpt_ids"])
    mask = torch.from_numpy(inputs["gpt_text_mask"])
    emb = off["embed"](ids, mask)
    t = ids.shape[1]
    hidden = (
        off["gpt"]
        .gpt(
            inputs_embeds=emb,
            attention_mask=torch.ones(1, t, dtype=torch.bool),
            position_ids=torch.arange(t)[None],
            use_cache=False,
        )
        .last_hidden_state
    )
    out["gpt_hidden"] = hidden.numpy()
    out["gpt_logits"] = torch.stack([h(hidden[:, -1]) for h in off["embed"].head_code], dim=1).numpy()
    out["decoder_mel"] = off["decoder"](torch.from_numpy(inputs["decoder_hidden"]).clone()).numpy()
    out["dvae_mel"] = off["dvae"](torch.from_numpy(inputs["dvae_codes"]).clone(), "decode").numpy()
    out["vocos_wav"] = off["vocos"].decode(torch.from_numpy(inputs["vocos_mel"])).numpy()

    # Whole synthesis, greedy, fixed length. The official sampler keeps >= 3 candidates even at
    # top_K=1, so greedy is reached with a vanishing temperature; min = max new tokens fixes length.
    result = official_generate(cfg, off, str(inputs["synth_text"]), int(inputs["synth_steps"]), 1e-6, seed=0)
    out["synth_codes"] = result.ids[0].numpy()
    hid = result.hiddens[0]
    out["synth_wav"] = off["vocos"].decode(off["decoder"](hid.T.unsqueeze(0).clone())).numpy()
    return out


def run(config: str, save_fixture: bool) -> bool:
    cfg = get_config(config)
    with tempfile.TemporaryDirectory() as tmp:
        root = make_random_assets(Path(tmp) / "asset", config, seed=0)
        inputs = make_stage_inputs(cfg, seed=1)
        off = official_modules(cfg, root)
        theirs = official_stage_outputs(cfg, off, inputs)
        ours = ours_stage_outputs(cfg, root, inputs)
    ok = True
    print(f"\n{config}: ttsperf vs chattts 0.2.5, fp32, same random weights (seed 0), inputs seed 1")
    print(f"{'stage':<14}{'shape':>22}{'max abs err':>14}{'max rel err':>14}  verdict")
    for stage in STAGES:
        a, b = ours[stage], theirs[stage]
        if a.shape != b.shape:
            print(f"{stage:<14}{str(b.shape):>22}  shape mismatch: ours {a.shape}")
            ok = False
            continue
        if stage == "synth_codes":
            same = int((a == b).sum())
            good = same == a.size
            print(
                f"{stage:<14}{str(b.shape):>22}{'':>28}  {'PASS' if good else 'FAIL'}"
                f" ({same}/{a.size} codes equal)"
            )
        else:
            abs_err = float(np.max(np.abs(a - b))) if a.size else 0.0
            rel = rel_error(a, b)
            good = rel <= REL_TOL
            print(f"{stage:<14}{str(b.shape):>22}{abs_err:>14.3e}{rel:>14.3e}  {'PASS' if good else 'FAIL'}")
        ok &= good
    if save_fixture and config == "tiny":
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            FIXTURE,
            **{f"in_{k}": np.asarray(v) for k, v in inputs.items()},
            **{f"out_{k}": v for k, v in theirs.items()},
        )
        print(f"saved official tiny outputs to {FIXTURE} ({FIXTURE.stat().st_size / 1e3:.0f} KB)")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="tiny,chattts")
    ap.add_argument("--save-fixture", action="store_true", help="rewrite tests/fixtures/conformance_tiny.npz")
    args = ap.parse_args()
    torch.manual_seed(0)
    import transformers

    transformers.logging.set_verbosity_error()  # its load report lists the embedding ChatTTS deletes
    logging.getLogger("official").setLevel(logging.ERROR)
    results = [run(c, args.save_fixture) for c in args.configs.split(",")]
    print("\nconformance:", "PASS" if all(results) else "FAIL", f"(tolerance {REL_TOL:g} relative, fp32)")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
