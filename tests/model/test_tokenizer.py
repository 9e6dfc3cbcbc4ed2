import json
import os
import string

import pytest
import torch
from tokenizers import Tokenizer as RawTokenizer
from tokenizers import models, normalizers
from transformers import BertTokenizerFast

from ttsperf.errors import UserError
from ttsperf.model import tokenizer as tokmod
from ttsperf.model.tokenizer import (
    CONTROL_TOKENS,
    Tokenizer,
    build_synthetic_tokenizer,
    decorate_code_prompt,
    load_tokenizer,
    save_tokenizer,
)

MIXED = "[Stts][empty_spk][speed_5]你好，世界。Hello there, don't worry![uv_break]好吗？[laugh][Ptts]"


@pytest.fixture(scope="module")
def full():
    return Tokenizer.synthetic()


@pytest.fixture(scope="module")
def saved(tmp_path_factory, full):
    return save_tokenizer(full.hf, tmp_path_factory.mktemp("tok") / "tokenizer")


def plain_bert():
    """A BERT tokenizer without ChatTTS's tokens (built the same way under transformers 4 and 5)."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])}
    raw = RawTokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    raw.normalizer = normalizers.BertNormalizer()  # transformers 4 reads the normalizer's settings
    return BertTokenizerFast(tokenizer_object=raw)


def copy_dir(src, dst):
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def test_synthetic_vocabulary_has_exactly_21178_entries(full):
    assert len(full.hf) == full.len == len(full) == 21178
    assert len(full.hf.get_vocab()) == 21178


def test_control_tokens_sit_at_the_real_ids(full):
    vocab = full.hf.get_vocab()
    assert len(CONTROL_TOKENS) == 50
    assert [vocab[t] for t in CONTROL_TOKENS] == list(range(21128, 21178))
    assert (vocab["[PAD]"], vocab["[UNK]"]) == (0, 100)
    assert (full.spk_emb_id, full.break_0_id, full.eos_id) == (
        vocab["[spk_emb]"],
        vocab["[break_0]"],
        vocab["[Ebreak]"],
    )
    # The official refine pass keeps ids below [break_0]: the in-text controls must stay there.
    assert all(vocab[t] < full.break_0_id for t in ("[uv_break]", "[lbreak]", "[laugh]"))


@pytest.mark.parametrize("size", [21178, 512])
def test_every_control_token_is_one_id(size):
    tok = Tokenizer.synthetic(size)
    vocab = tok.hf.get_vocab()
    for token in CONTROL_TOKENS:
        assert tok.ids(f"你{token}好") == [
            vocab.get("你", vocab["[UNK]"]),
            vocab[token],
            vocab.get("好", vocab["[UNK]"]),
        ]


def test_small_vocabulary_has_exactly_512_entries_with_the_essentials():
    tok = build_synthetic_tokenizer(512)
    vocab = tok.get_vocab()
    assert len(tok) == len(vocab) == 512
    must = [*CONTROL_TOKENS, *string.ascii_lowercase, *string.digits, *"，。！？、,.!?", "啊"]
    assert [t for t in must if t not in vocab] == []
    assert tok("Hello World 42!", add_special_tokens=False)["input_ids"].count(vocab["[UNK]"]) == 0


def test_vocabulary_too_small_for_the_essentials_is_rejected():
    with pytest.raises(UserError, match="vocab_size: expected at least .* found 100"):
        build_synthetic_tokenizer(100)


def test_build_is_deterministic():
    assert build_synthetic_tokenizer(512).backend_tokenizer.to_str() == (
        build_synthetic_tokenizer(512).backend_tokenizer.to_str()
    )


def test_chinese_splits_one_token_per_character(full):
    text = "今天天气很好，我们去公园散步吧。"
    pieces = full.hf.convert_ids_to_tokens(full.ids(text))
    assert pieces == list(text)
    assert full.hf.get_vocab()["[UNK]"] not in full.ids(text)


def test_english_is_lower_cased_into_known_pieces(full):
    pieces = full.hf.convert_ids_to_tokens(full.ids("Hello World"))
    assert pieces == ["h", "##e", "##l", "##l", "##o", "w", "##o", "##r", "##l", "##d"]


def test_saved_folder_loads_with_from_pretrained_to_the_same_ids(full, saved):
    assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"} <= set(
        os.listdir(saved)
    )
    assert len((saved / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 21178
    reloaded = BertTokenizerFast.from_pretrained(str(saved))
    assert len(reloaded) == 21178
    assert reloaded(MIXED, add_special_tokens=False)["input_ids"] == full.ids(MIXED)
    assert Tokenizer.from_dir(saved, expected_size=21178).ids(MIXED) == full.ids(MIXED)


def test_encode_pads_on_the_left_and_repeats_ids_per_codebook(full):
    short, long = decorate_code_prompt("你好"), decorate_code_prompt("你好，世界")
    input_ids, attention_mask, text_mask = full.encode([short, long], num_vq=4)
    n_short, n_long = len(full.ids(short)), len(full.ids(long))
    assert (n_short, n_long) == (6, 9)
    assert input_ids.shape == (2, 9, 4) and input_ids.dtype == torch.long
    assert attention_mask.shape == (2, 9) and text_mask.shape == (2, 9) and text_mask.dtype == torch.bool
    assert input_ids[0, :3].eq(0).all() and attention_mask[0, :3].eq(0).all()
    assert input_ids[0, 3:, 0].tolist() == full.ids(short)
    assert input_ids[1, :, 0].tolist() == full.ids(long)
    assert attention_mask.tolist() == [[0, 0, 0] + [1] * 6, [1] * 9]
    assert text_mask.tolist() == attention_mask.bool().tolist()
    assert torch.equal(input_ids, input_ids[..., :1].expand(-1, -1, 4))


def test_encode_rejects_no_texts_and_no_codebooks(full):
    with pytest.raises(UserError, match="texts"):
        full.encode([], num_vq=4)
    with pytest.raises(UserError, match="num_vq"):
        full.encode(["x"], num_vq=0)


def test_decorate_code_prompt_gives_the_official_form():
    assert decorate_code_prompt("你好") == "[Stts][empty_spk][speed_5]你好[Ptts]"
    assert decorate_code_prompt("hi", spk_emb=True) == "[Stts][spk_emb][speed_5]hi[Ptts]"
    assert decorate_code_prompt("hi", prompt="") == "[Stts][empty_spk]hi[Ptts]"
    # Markers typed by the user are removed, then the text is stripped (official behaviour).
    assert decorate_code_prompt("  [Stts][spk_emb] hi [empty_spk] ", prompt="[speed_2]") == (
        "[Stts][empty_spk][speed_2]hi[Ptts]"
    )
    assert Tokenizer.decorate_code_prompt("a") == decorate_code_prompt("a")


def test_empty_text_is_rejected():
    with pytest.raises(UserError, match="empty text"):
        decorate_code_prompt("  [Stts][empty_spk]  ")


def test_tokenizer_without_control_tokens_is_rejected():
    plain = plain_bert()
    with pytest.raises(UserError, match=r"missing \[Stts\], \[Ptts\], \[spk_emb\]"):
        Tokenizer(plain, source="plain")


# --- bad asset folders: one test per case, each message names the path ---


def test_missing_directory(tmp_path):
    path = tmp_path / "nowhere"
    with pytest.raises(UserError, match="not found") as err:
        load_tokenizer(path)
    assert str(path) in str(err.value)


def test_file_instead_of_directory(tmp_path):
    path = tmp_path / "tokenizer"
    path.write_text("x")
    with pytest.raises(UserError, match="is a file") as err:
        load_tokenizer(path)
    assert str(path) in str(err.value)


def test_unreadable_directory(tmp_path, saved, monkeypatch):
    path = copy_dir(saved, tmp_path / "tokenizer")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):  # root reads anything: simulate what the OS says to others

            def denied(p):
                raise PermissionError(13, "Permission denied", str(p))

            monkeypatch.setattr(tokmod.os, "listdir", denied)
        with pytest.raises(UserError, match="cannot be read") as err:
            load_tokenizer(path)
    finally:
        path.chmod(0o755)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_missing_file(tmp_path, saved, name):
    path = copy_dir(saved, tmp_path / "tokenizer")
    (path / name).unlink()
    with pytest.raises(UserError, match=f"missing {name}") as err:
        load_tokenizer(path)
    assert str(path) in str(err.value)


def test_empty_directory(tmp_path):
    path = tmp_path / "tokenizer"
    path.mkdir()
    with pytest.raises(UserError, match="missing tokenizer.json, tokenizer_config.json.*empty folder") as err:
        load_tokenizer(path)
    assert str(path) in str(err.value)


def test_truncated_tokenizer_json(tmp_path, saved):
    path = copy_dir(saved, tmp_path / "tokenizer")
    text = (path / "tokenizer.json").read_text(encoding="utf-8")
    (path / "tokenizer.json").write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(UserError, match="expected valid JSON") as err:
        load_tokenizer(path)
    assert str(path / "tokenizer.json") in str(err.value)


def test_binary_garbage_tokenizer_json(tmp_path, saved):
    path = copy_dir(saved, tmp_path / "tokenizer")
    (path / "tokenizer.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError, match="expected UTF-8 JSON") as err:
        load_tokenizer(path)
    assert str(path / "tokenizer.json") in str(err.value)


def test_tokenizer_json_that_is_not_a_tokenizer(tmp_path, saved):
    path = copy_dir(saved, tmp_path / "tokenizer")
    (path / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "Nonsense"}}))
    with pytest.raises(UserError, match="expected a `tokenizers` tokenizer file") as err:
        load_tokenizer(path)
    assert str(path / "tokenizer.json") in str(err.value)


def test_corrupt_tokenizer_config_json(tmp_path, saved):
    path = copy_dir(saved, tmp_path / "tokenizer")
    (path / "tokenizer_config.json").write_text('{"tokenizer_class": ')
    with pytest.raises(UserError, match="expected valid JSON") as err:
        load_tokenizer(path)
    assert str(path / "tokenizer_config.json") in str(err.value)


def test_tokenizer_without_chattts_tokens(tmp_path):
    plain = plain_bert()
    path = save_tokenizer(plain, tmp_path / "tokenizer")
    with pytest.raises(UserError, match="expected ChatTTS control tokens") as err:
        load_tokenizer(path)
    assert str(path / "tokenizer.json") in str(err.value)


def test_tokenizer_of_the_wrong_size(saved):
    with pytest.raises(UserError, match="expected 512 entries .* found 21178") as err:
        load_tokenizer(saved, expected_size=512)
    assert str(saved / "tokenizer.json") in str(err.value)
