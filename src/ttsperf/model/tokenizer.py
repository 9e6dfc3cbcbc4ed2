"""ChatTTS's text tokenizer: the asset directory's BertTokenizerFast, or a synthetic one built here.

A real asset directory (`asset/tokenizer/`) is loaded with `BertTokenizerFast.from_pretrained`, as
the official package does. Synthetic runs need no download: `build_synthetic_tokenizer` makes a
BERT-style WordPiece tokenizer with the `tokenizers` library, of exactly the real size (21,178
entries) or any smaller size for the `tiny` config, with ChatTTS's control tokens as single,
never-split tokens at the same ids as in the real vocabulary.

    tok = Tokenizer.synthetic()                    # or Tokenizer.from_dir("asset/tokenizer")
    text = tok.decorate_code_prompt("你好，世界。")   # "[Stts][empty_spk][speed_5]你好，世界。[Ptts]"
    input_ids, attention_mask, text_mask = tok.encode([text], num_vq=4)
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterator
from pathlib import Path

import torch
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as RawTokenizer
from transformers import BertTokenizerFast

from ttsperf.errors import UserError

# What is known about the real vocabulary, and what is chosen here:
# - Known (official package 0.2.5): 21,178 entries; loaded with BertTokenizerFast; prompts use
#   [Stts] [Ptts] [spk_emb] [empty_spk] [Sbreak] [Pbreak] [speed_5]; [Ebreak] is the end of a
#   refined text; tokens with an id >= [break_0] are dropped from refined text, so the prompt-only
#   controls sit after [break_0]. The README documents [break_0-7], [oral_0-9], [laugh_0-2] as
#   prompt controls and [uv_break], [lbreak], [laugh] as the controls that work inside text.
# - From two independent third-party sources that agree (lenML/Speech-AI-Forge
#   modules/core/tn/ChatTtsTN.py lists the tokens to protect from normalisation; a BM1684X port's
#   notes say the asset's vocab.txt is the 21,128-entry Chinese BERT vocabulary and the 50 ChatTTS
#   tokens follow at ids 21128-21177, in this order). Consistent with the known facts above
#   (21,128 + 50 = 21,178; [uv_break] [lbreak] [laugh] before [break_0]).
# - Chosen (not known): the body of the vocabulary. The real one is Google's Chinese BERT
#   vocabulary, which cannot be rebuilt without a download; ours holds ASCII digits and letters,
#   punctuation and CJK characters (see `_vocab_entries`). Lower-casing, like BertTokenizerFast's
#   default. English therefore splits into letters here where the real vocabulary has wordpieces:
#   English prompts come out longer in tokens than with the real asset.
_STRUCTURE_TOKENS = (
    "[Sasr]", "[Pasr]", "[Easr]", "[Stts]", "[Ptts]", "[Etts]", "[Sbreak]", "[Pbreak]", "[Ebreak]",
    "[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[undefine]", "[laugh]", "[spk_emb]",
    "[empty_spk]", "[music]", "[pure]",
)  # fmt: skip
CONTROL_TOKENS: tuple[str, ...] = (
    *_STRUCTURE_TOKENS,
    *(f"[break_{i}]" for i in range(8)),
    *(f"[laugh_{i}]" for i in range(3)),
    *(f"[oral_{i}]" for i in range(10)),
    *(f"[speed_{i}]" for i in range(10)),
)
# The tokens our code relies on; a tokenizer without them cannot drive the pipeline.
REQUIRED_TOKENS = ("[Stts]", "[Ptts]", "[spk_emb]", "[empty_spk]", "[break_0]", "[Ebreak]")

DEFAULT_VOCAB_SIZE = 21178
_BERT_SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")  # [PAD] is id 0, before the [unused] block
# Chinese BERT keeps [unused1]..[unused99] at ids 1-99, so [UNK] is 100 as in the real vocabulary.
_BERT_UNUSED = 99
_CJK_PUNCTUATION = "，。！？、；：“”‘’（）《》【】「」『』…—·"
REQUIRED_FILES = ("tokenizer.json", "tokenizer_config.json")
# Prompt markers the official package removes from user text before decorating it.
_PROMPT_MARKERS = ("[Stts]", "[spk_emb]", "[empty_spk]")


def _gb2312_hanzi() -> Iterator[str]:
    """GB 2312's 6,763 hanzi: level 1 (3,755 common characters, rows 16-55) then level 2 (rows 56-87).

    The standard's split into common and less common characters puts the likely ones first when a
    small vocabulary cannot hold them all. Python's built-in gb2312 codec: no download.
    """
    for row in range(0xB0, 0xF8):
        for cell in range(0xA1, 0xFF):
            try:
                yield bytes((row, cell)).decode("gb2312")
            except UnicodeDecodeError:  # unassigned cells at the end of some rows
                continue


def _cjk_characters() -> Iterator[str]:
    """GB 2312 hanzi, then the rest of CJK Unified Ideographs (U+4E00-U+9FFF) in code-point order."""
    seen = set()
    for ch in _gb2312_hanzi():
        seen.add(ch)
        yield ch
    for code in range(0x4E00, 0xA000):
        if chr(code) not in seen:
            yield chr(code)


def _vocab_entries(vocab_size: int) -> list[str]:
    """The vocabulary in id order: BERT specials, ASCII, punctuation, CJK, filler, control tokens."""
    head = ["[PAD]"]
    if vocab_size >= DEFAULT_VOCAB_SIZE:
        head += [f"[unused{i}]" for i in range(1, _BERT_UNUSED + 1)]
    head += _BERT_SPECIALS
    alnum = list(string.digits + string.ascii_lowercase)  # the normalizer lower-cases first
    # "##x" continuations let an unknown word split into letters instead of one [UNK].
    basics = alnum + [f"##{c}" for c in alnum] + list(string.punctuation) + list(_CJK_PUNCTUATION)
    required = len(head) + len(basics) + len(CONTROL_TOKENS)
    if vocab_size < required:
        raise UserError(
            f"vocab_size: expected at least {required} (BERT specials, {len(CONTROL_TOKENS)} ChatTTS "
            f"control tokens, ASCII digits, letters and punctuation), found {vocab_size}"
        )
    room = vocab_size - required
    cjk = [ch for _, ch in zip(range(room), _cjk_characters(), strict=False)]
    unused_from = len(head) - len(_BERT_SPECIALS)
    filler = [f"[unused{unused_from + i}]" for i in range(room - len(cjk))]
    entries = head + basics + cjk + filler + list(CONTROL_TOKENS)
    assert len(entries) == vocab_size and len(set(entries)) == vocab_size
    return entries


def build_synthetic_tokenizer(vocab_size: int = DEFAULT_VOCAB_SIZE) -> BertTokenizerFast:
    """A BERT-style WordPiece tokenizer of exactly `vocab_size` entries, built locally and deterministically.

    CJK characters become one token each (BERT's normalizer spaces them apart); ChatTTS's control
    tokens are special added tokens, matched before normalisation, so they are never split or
    lower-cased. At the default size the control tokens have the real ids 21128-21177.
    """
    entries = _vocab_entries(vocab_size)
    vocab = {token: i for i, token in enumerate(entries)}
    raw = RawTokenizer(
        models.WordPiece(
            vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100
        )
    )
    raw.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    raw.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    raw.decoder = decoders.WordPiece(prefix="##")
    # Already in the vocabulary, so registering them adds no entries: they keep their ids.
    raw.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in ("[PAD]", *_BERT_SPECIALS, *CONTROL_TOKENS)]
    )
    return BertTokenizerFast(
        tokenizer_object=raw,
        do_lower_case=True,
        tokenize_chinese_chars=True,
        strip_accents=None,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )


def save_tokenizer(tok: BertTokenizerFast, directory: str | os.PathLike) -> Path:
    """Write `tok` as a folder `BertTokenizerFast.from_pretrained` loads unchanged.

    `save_pretrained` writes tokenizer.json and tokenizer_config.json (and, in transformers 4.x,
    special_tokens_map.json and vocab.txt); the last two are added when missing so the folder has
    the same files under every transformers version (the official asset has all but vocab.txt).
    """
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(str(path))
        if not (path / "special_tokens_map.json").exists():
            specials = {k: str(v) for k, v in tok.special_tokens_map.items() if isinstance(v, str)}
            (path / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n")
        if not (path / "vocab.txt").exists():
            by_id = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
            (path / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in by_id), encoding="utf-8")
    except OSError as e:
        raise UserError(f"tokenizer directory {path}: cannot be written ({e.strerror or e})") from None
    return path


def _read_json(file: Path) -> str:
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(
            f"{file}: cannot be read ({e.strerror or e}); expected a readable JSON file"
        ) from None
    except UnicodeDecodeError as e:
        raise UserError(f"{file}: expected UTF-8 JSON, found undecodable bytes at offset {e.start}") from None
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(
            f"{file}: expected valid JSON, found a syntax error ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    return text


def _check_control_tokens(tok: BertTokenizerFast, where: str) -> dict[str, int]:
    vocab = tok.get_vocab()
    absent = [t for t in REQUIRED_TOKENS if t not in vocab]
    if absent:
        raise UserError(
            f"{where}: expected ChatTTS control tokens {', '.join(REQUIRED_TOKENS)}; "
            f"missing {', '.join(absent)}"
        )
    return vocab


def load_tokenizer(directory: str | os.PathLike, expected_size: int | None = None) -> BertTokenizerFast:
    """Load an asset tokenizer folder, checking it first so every failure names the file and the fault."""
    path = Path(directory)
    wanted = " and ".join(REQUIRED_FILES)
    if not path.exists():
        raise UserError(f"tokenizer directory {path}: not found; expected a folder holding {wanted}")
    if not path.is_dir():
        raise UserError(f"tokenizer directory {path}: is a file; expected a folder holding {wanted}")
    try:
        names = set(os.listdir(path))
    except OSError as e:
        raise UserError(f"tokenizer directory {path}: cannot be read ({e.strerror or e})") from None
    missing = [name for name in REQUIRED_FILES if name not in names]
    if missing:
        found = ", ".join(sorted(names)) or "an empty folder"
        raise UserError(
            f"tokenizer directory {path}: missing {', '.join(missing)}; expected {wanted}, found {found}"
        )
    _read_json(path / "tokenizer_config.json")
    tokenizer_json = path / "tokenizer.json"
    text = _read_json(tokenizer_json)
    try:
        RawTokenizer.from_str(text)
    except Exception as e:  # the tokenizers library raises plain Exception for a malformed file
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"{tokenizer_json}: expected a `tokenizers` tokenizer file, found one it rejects ({first})"
        ) from None
    try:
        tok = BertTokenizerFast.from_pretrained(str(path))
    except Exception as e:  # anything transformers objects to, reported as one line
        raise UserError(
            f"tokenizer directory {path}: BertTokenizerFast cannot load it ({type(e).__name__}: {e})"
        ) from None
    _check_control_tokens(tok, str(tokenizer_json))
    if expected_size is not None and len(tok) != expected_size:
        raise UserError(
            f"{tokenizer_json}: expected {expected_size} entries (the GPT's num_text_tokens), "
            f"found {len(tok)}"
        )
    return tok


def decorate_code_prompt(text: str, prompt: str = "[speed_5]", spk_emb: bool = False) -> str:
    """The official code-generation prompt: `[Stts][empty_spk]{prompt}{text}[Ptts]`.

    With a speaker embedding the slot is `[spk_emb]` (the GPT writes the embedding there). As in the
    official package, prompt markers typed in the text are removed and the text is stripped first.
    """
    for marker in _PROMPT_MARKERS:
        text = text.replace(marker, "")
    text = text.strip()
    if not text:
        raise UserError("empty text: expected something to say, found only whitespace or prompt markers")
    return f"[Stts]{'[spk_emb]' if spk_emb else '[empty_spk]'}{prompt or ''}{text}[Ptts]"


class Tokenizer:
    """A BertTokenizerFast with ChatTTS's encoding: left padding, ids repeated over the codebooks."""

    decorate_code_prompt = staticmethod(decorate_code_prompt)

    def __init__(self, tok: BertTokenizerFast, source: str = "tokenizer"):
        vocab = _check_control_tokens(tok, source)
        self.hf = tok
        self.len = len(tok)
        self.spk_emb_id: int = vocab["[spk_emb]"]
        self.break_0_id: int = vocab["[break_0]"]
        self.eos_id: int = vocab["[Ebreak]"]

    @classmethod
    def from_dir(cls, directory: str | os.PathLike, expected_size: int | None = None) -> Tokenizer:
        return cls(load_tokenizer(directory, expected_size), source=str(Path(directory) / "tokenizer.json"))

    @classmethod
    def synthetic(cls, vocab_size: int = DEFAULT_VOCAB_SIZE) -> Tokenizer:
        return cls(build_synthetic_tokenizer(vocab_size), source="synthetic tokenizer")

    def __len__(self) -> int:
        return self.len

    def ids(self, text: str) -> list[int]:
        """Token ids of one text, without [CLS]/[SEP] (ChatTTS adds none)."""
        return self.hf(text, add_special_tokens=False)["input_ids"]

    def encode(self, texts: list[str], num_vq: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> input_ids (B, T, num_vq) int64, attention_mask (B, T) int64, text_mask (B, T) bool.

        The official `Tokenizer.encode` without an audio prompt: each text encoded alone, left-padded
        with id 0 and mask 0 to the longest, the ids repeated across the `num_vq` codebook axis, and
        text_mask = attention_mask as bool (every real position is a text position).
        """
        if isinstance(texts, str):
            texts = [texts]
        if not texts:
            raise UserError("texts: expected at least one text to encode, found none")
        if num_vq < 1:
            raise UserError(f"num_vq: expected a positive number of codebooks, found {num_vq}")
        return self.encode_ids(self.hf(list(texts), add_special_tokens=False)["input_ids"], num_vq)

    @staticmethod
    def encode_ids(rows: list[list[int]], num_vq: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`encode` of texts already tokenized (`ids`, one list per text): the same tensors."""
        length = max(len(r) for r in rows)
        input_ids = torch.zeros(len(rows), length, dtype=torch.long)
        attention_mask = torch.zeros(len(rows), length, dtype=torch.long)
        for i, row in enumerate(rows):
            if row:
                input_ids[i, length - len(row) :] = torch.tensor(row, dtype=torch.long)
                attention_mask[i, length - len(row) :] = 1
        text_mask = attention_mask.bool()
        return input_ids.unsqueeze(-1).expand(-1, -1, num_vq).clone(), attention_mask, text_mask

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode(ids, skip_special_tokens=False)


__all__ = [
    "CONTROL_TOKENS",
    "DEFAULT_VOCAB_SIZE",
    "REQUIRED_FILES",
    "REQUIRED_TOKENS",
    "Tokenizer",
    "build_synthetic_tokenizer",
    "decorate_code_prompt",
    "load_tokenizer",
    "save_tokenizer",
]
