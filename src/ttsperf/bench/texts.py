"""Workloads: which texts the load test sends, and how long the speech for a text should be.

The default is the guide's own sentence, so a first run compares like with like. The built-in sets
were written for this project (no third-party corpus): Chinese and English, from one-line dialogue
turns to paragraphs, because TTS cost scales with the audio produced, and one length hides that.
`--texts FILE` takes a .txt (one text per line) or .jsonl (one object per line, `text` required;
other fields are passed to the adapter, e.g. `voice`, `seed`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ttsperf.errors import UserError
from ttsperf.facts import CJK_CHARS_PER_SECOND, WORDS_PER_SECOND

GUIDE_SENTENCE = "你好，这是一段用于压测的文本，长度八秒左右。"

ZH_SHORT = [
    "好的，马上为您查询。",
    "请稍等一下。",
    "您的订单已经发货了。",
    "今天北京晴，最高气温二十六度。",
    "没问题，我明白了。",
]
ZH_MEDIUM = [
    "欢迎致电客服中心，我是您的智能语音助手，请问有什么可以帮您？",
    "您预约的会议将在明天上午十点开始，地点在三楼的第二会议室。",
    "根据您的描述，建议先重启路由器，等待一分钟后再尝试连接网络。",
    "这款耳机的续航时间大约是三十个小时，支持快速充电和主动降噪。",
]
ZH_LONG = [
    "语音合成服务的延迟由几部分组成：请求在队列里等待的时间，模型生成语音编码的时间，"
    "以及声码器把编码还原成波形的时间。压测时要分别观察首包时间和整句时间，"
    "因为实时对话关心的是用户多久能听到第一个字，而离线批处理只关心每小时能合成多少分钟的音频。",
    "选显卡不能只看显存大小。显存决定能同时放下多少个请求的缓存，带宽决定每一步解码有多快，"
    "而驱动、框架版本和批处理策略往往比显卡型号更影响最终的吞吐量。"
    "最可靠的办法是用真实的文本和真实的并发把服务压一遍，再看延迟分布和显卡利用率。",
    "从前有一座小城，城里的图书馆每天晚上都会为孩子们朗读一个故事。"
    "后来读故事的老人退休了，馆长便请来一台会说话的机器。孩子们起初有些失望，"
    "可是机器的声音温和又耐心，慢慢地，大家又开始在傍晚时分聚到图书馆里来。",
]
EN_SHORT = [
    "Sure, one moment please.",
    "Your package has shipped.",
    "I did not catch that, could you repeat it?",
    "The meeting starts at ten.",
    "Thanks, that is all for today.",
]
EN_MEDIUM = [
    "Welcome back. You have three new messages and one reminder for this afternoon.",
    "Turn left in two hundred meters, then keep right to stay on the main road.",
    "The battery lasts about thirty hours and a ten minute charge gives you three more.",
    "Your appointment has been moved to Thursday at half past two in the afternoon.",
]
EN_LONG = [
    "Speech synthesis latency has several parts: the time a request waits in the queue, the "
    "time the model needs to generate its audio codes, and the time the vocoder needs to turn "
    "those codes into a waveform. A voice assistant cares about how soon the first word plays; "
    "an audiobook pipeline only cares about how many hours of audio it can produce per hour.",
    "Choosing a graphics card for a speech model is not only about memory size. Memory decides "
    "how many requests fit at once, bandwidth decides how fast each decoding step runs, and the "
    "batching policy often matters more than the model of the card. The honest way to decide is "
    "to load the server with real text at real concurrency and read the latency distribution.",
    "Once there was a small town whose library read a story aloud to the children every "
    "evening. When the old reader retired, the librarian brought in a machine that could talk. "
    "The children were disappointed at first, but the voice was warm and patient, and slowly "
    "they came back to the library at dusk.",
]

TEXT_SETS: dict[str, list[str]] = {
    "guide": [GUIDE_SENTENCE],
    "zh-short": ZH_SHORT,
    "zh-medium": ZH_MEDIUM,
    "zh-long": ZH_LONG,
    "zh": ZH_SHORT + ZH_MEDIUM + ZH_LONG,
    "en-short": EN_SHORT,
    "en-medium": EN_MEDIUM,
    "en-long": EN_LONG,
    "en": EN_SHORT + EN_MEDIUM + EN_LONG,
    "mixed": ZH_SHORT + ZH_MEDIUM + ZH_LONG + EN_SHORT + EN_MEDIUM + EN_LONG,
}

# Speech rate used to judge whether a response's duration is plausible for its text: the sourced
# read-speech rates of ttsperf.facts (which the synthetic model's lengths use too); the check
# allows a factor of 3 either way.
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9']+")


def expected_seconds(text: str) -> float:
    """Rough duration of natural speech for `text` (seconds)."""
    return len(_CJK.findall(text)) / CJK_CHARS_PER_SECOND + len(_WORD.findall(text)) / WORDS_PER_SECOND


@dataclass(frozen=True)
class Item:
    """One text to synthesise, with optional per-request fields from a jsonl file."""

    text: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Workload:
    name: str
    items: list[Item]

    def item(self, i: int) -> Item:
        """Texts are used in order and wrap around, so request i always carries the same text."""
        return self.items[i % len(self.items)]

    def describe(self) -> dict[str, Any]:
        chars = np.array([len(it.text) for it in self.items])
        secs = np.array([expected_seconds(it.text) for it in self.items])
        return {
            "name": self.name,
            "texts": len(self.items),
            "chars": {"min": int(chars.min()), "median": float(np.median(chars)), "max": int(chars.max())},
            "expected_audio_s": {
                "min": round(float(secs.min()), 2),
                "median": round(float(np.median(secs)), 2),
                "max": round(float(secs.max()), 2),
            },
        }


def load_workload(texts: str | None = None, text_set: str | None = None) -> Workload:
    """`--texts FILE` wins over `--text-set NAME`; neither -> the guide's sentence."""
    if texts:
        return _load_file(Path(texts))
    name = text_set or "guide"
    if name not in TEXT_SETS:
        raise UserError(f"--text-set: unknown set {name!r}; expected one of {', '.join(TEXT_SETS)}")
    return Workload(name, [Item(t) for t in TEXT_SETS[name]])


def _load_file(path: Path) -> Workload:
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--texts {path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    items: list[Item] = []
    if path.suffix.lower() == ".jsonl":
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"--texts {path}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
                raise UserError(f'--texts {path}:{n}: expected an object with a non-empty "text" string')
            items.append(Item(obj["text"], {k: v for k, v in obj.items() if k != "text"}))
    else:
        items = [Item(line.strip()) for line in raw.splitlines() if line.strip()]
    if not items:
        raise UserError(f'--texts {path}: no texts found (expected one per line, or jsonl with "text")')
    return Workload(str(path), items)
