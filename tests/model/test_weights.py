"""Loading an official-layout asset dir: round trip, and one clear error per kind of bad input."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ttsperf.errors import UserError
from ttsperf.model.config import TINY
from ttsperf.model.weights import build_model, load_assets, save_assets


@pytest.fixture(scope="module")
def asset_dir(tmp_path_factory) -> Path:
    return save_assets(build_model(TINY, seed=3), tmp_path_factory.mktemp("asset") / "asset")


@pytest.fixture
def broken(asset_dir, tmp_path) -> Path:
    """A private copy to damage."""
    return Path(shutil.copytree(asset_dir, tmp_path / "asset"))


def test_official_layout_and_round_trip(asset_dir):
    for rel in (
        "gpt/config.json",
        "gpt/model.safetensors",
        "Embed.safetensors",
        "Decoder.safetensors",
        "DVAE.safetensors",
        "Vocos.safetensors",
    ):
        assert (asset_dir / rel).is_file(), rel
    embed_keys = set(load_file(str(asset_dir / "Embed.safetensors")))
    assert "head_code.0.parametrizations.weight.original0" in embed_keys  # official weight-norm names
    original = build_model(TINY, seed=3)
    loaded = load_assets(TINY, asset_dir)
    for (name, a), (_, b) in zip(original.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_synthetic_weights_depend_on_seed_only():
    a, b, c = (build_model(TINY, seed=s).state_dict() for s in (1, 1, 2))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("config", ["tiny", "skeleton"])
def test_skipping_the_layers_own_random_init_changes_no_weight(config: str):
    """build_model skips the random fills of the layers' constructors (most of a chattts build's
    time): init_synthetic overwrites every tensor they fill, so the weights are those of a build
    that ran them, to the bit."""
    from ttsperf.model.config import get_config
    from ttsperf.model.weights import ChatTTSModel, init_synthetic

    cfg = get_config(config)
    fast = build_model(cfg, seed=5).state_dict()
    full = init_synthetic(ChatTTSModel(cfg), 5).eval().state_dict()
    assert fast.keys() == full.keys()
    for name in full:
        assert torch.equal(fast[name], full[name]), name


def _expect(path: Path, *fragments: str) -> None:
    with pytest.raises(UserError) as err:
        load_assets(TINY, path)
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)


def test_missing_directory(tmp_path):
    _expect(tmp_path / "nope", "nope", "does not exist")


def test_missing_file(broken):
    (broken / "Vocos.safetensors").unlink()
    _expect(broken, "Vocos.safetensors", "missing")


def test_a_pickle_beside_a_missing_safetensors_file_is_named_and_never_loaded(broken):
    (broken / "Decoder.safetensors").rename(broken / "Decoder.pt")  # any bytes: it must not be read
    _expect(broken, "Decoder.safetensors: missing; found Decoder.pt, and pickles are never loaded",
            "convert it to safetensors")  # fmt: skip


def test_an_asset_dir_names_its_config(asset_dir, broken):
    from ttsperf.model.weights import config_of_assets

    assert config_of_assets(asset_dir) == "tiny"
    (broken / "gpt" / "config.json").unlink()
    assert config_of_assets(broken) is None  # loading then names the missing file
    (broken / "gpt" / "config.json").write_text(json.dumps({"hidden_size": 100, "num_hidden_layers": 3}))
    with pytest.raises(UserError, match="hidden_size = 100.*match no config"):
        config_of_assets(broken)


def test_truncated_file(broken):
    path = broken / "Decoder.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    _expect(broken, "Decoder.safetensors", "not a valid safetensors file")


def test_corrupt_file(broken):
    (broken / "DVAE.safetensors").write_bytes(b"\x00garbage" * 100)
    _expect(broken, "DVAE.safetensors", "not a valid safetensors file")


def _rewrite(path: Path, change) -> None:
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_wrong_shape(broken):
    _rewrite(broken / "Embed.safetensors", lambda t: t.__setitem__("emb_text.weight", torch.zeros(3, 3)))
    _expect(broken, "Embed.safetensors", "emb_text.weight", "(3, 3)", "expected (512, 64)")


def test_wrong_dtype(broken):
    def to_int(t):
        t["out_conv.weight"] = t["out_conv.weight"].to(torch.int32)

    _rewrite(broken / "Decoder.safetensors", to_int)
    _expect(broken, "Decoder.safetensors", "out_conv.weight", "torch.int32", "expected float32")


def test_missing_key(broken):
    _rewrite(broken / "Vocos.safetensors", lambda t: t.pop("head.out.bias"))
    _expect(broken, "Vocos.safetensors", "missing tensor 'head.out.bias'")


def test_unexpected_key(broken):
    _rewrite(broken / "gpt" / "model.safetensors", lambda t: t.__setitem__("lm_head.weight", torch.zeros(2)))
    _expect(broken, "model.safetensors", "unexpected tensor 'lm_head.weight'")


def test_config_of_another_size(broken):
    cfg = (
        (broken / "gpt" / "config.json")
        .read_text()
        .replace('"num_hidden_layers": 2', '"num_hidden_layers": 20')
    )
    (broken / "gpt" / "config.json").write_text(cfg)
    _expect(broken, "config.json", "num_hidden_layers = 20", "expected 2")


def test_unreadable_directory(broken):
    """As root every directory is readable, so the check runs in a child that drops to 'nobody'."""
    os.chmod(broken, 0o000)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            load_assets(TINY, broken)
            message = b"loaded"
        except UserError as exc:
            message = str(exc).encode()
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            message = f"other: {exc!r}".encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    message = os.read(read, 4096).decode()
    os.chmod(broken, 0o755)
    assert str(broken) in message and "not readable" in message, message


DAMAGES = {
    "missing file": lambda d: (d / "Vocos.safetensors").unlink(),
    "truncated": lambda d: (d / "Decoder.safetensors").write_bytes(
        (d / "Decoder.safetensors").read_bytes()[:999]
    ),
    "corrupt": lambda d: (d / "DVAE.safetensors").write_bytes(b"\x00garbage" * 100),
    "wrong shape": lambda d: _rewrite(
        d / "Embed.safetensors", lambda t: t.__setitem__("emb_text.weight", torch.zeros(3, 3))
    ),
    "missing key": lambda d: _rewrite(d / "Vocos.safetensors", lambda t: t.pop("head.out.bias")),
    "unexpected key": lambda d: _rewrite(
        d / "Embed.safetensors", lambda t: t.__setitem__("extra", torch.zeros(1))
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_cli_names_the_file_and_exits_2(damage, tmp_path):
    from typer.testing import CliRunner

    from ttsperf.cli.main import app
    from ttsperf.model.assets import make_random_assets

    root = make_random_assets(tmp_path / "asset", "tiny", seed=0)
    DAMAGES[damage](root)
    res = CliRunner().invoke(
        app, ["synth", "hi", "--assets", str(root), "--config", "tiny", "-o", str(tmp_path / "o.wav")]
    )
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(root) in lines[0], res.output
