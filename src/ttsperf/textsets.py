"""The texts both tools share: bench's built-in text sets, and how long the speech of a text is.

`bench --text-set NAME` sends a set's texts in order; `plan --text-set NAME` plans (and `plan
--predict` predicts) requests drawn from the same texts, each as long as its speech and its prompt;
so a plan's check command that names the set runs the work the plan simulated. The sets were
written for this project (no third-party corpus): Chinese and English, from one-line dialogue turns
to paragraphs, because TTS cost scales with the audio produced, and one length hides that. `zh-8s`
is the guide's stated workload ("单句 8 s", 100 Chinese utterances of 8 s each) as texts bench can
send: five sentences of 41-42 characters, 7.9-8.1 s at the sourced speech rate; the guide's own
payload sentence (the `guide` set) says it is "about eight seconds" and is 3.67 s.

Neutral: bench and plan import it, and it imports no layer (pyproject.toml's contracts).
"""

from __future__ import annotations

import re

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

ZH_8S = [
    "您好，欢迎使用智能客服。您的快递已经到达小区门口的驿站，取件码是三五七二，请在今晚八点前取走。",
    "明天上午九点在三楼会议室召开季度总结会，请各部门负责人准备好材料，并在会前十分钟到场签到。",
    "根据天气预报，今天夜间到明天白天有中到大雨，气温下降五到八度，出门请记得带伞，注意添加衣物。",
    "您本月的话费账单已经生成，共计八十六元五角，可以通过手机银行缴费，如有疑问请拨打客服热线。",
    "前方五百米右转进入辅路，然后沿着主路继续直行两公里，目的地在您的左侧，预计还要行驶十分钟。",
]

TEXT_SETS: dict[str, list[str]] = {
    "guide": [GUIDE_SENTENCE],
    "zh-8s": ZH_8S,
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


# ChatTTS's code prompt around a text: [Stts] [empty_spk] [speed_5] ... [Ptts] (model/tokenizer.py)
PROMPT_CONTROL_TOKENS = 4
_PUNCT = re.compile(r"[^\w\s]")


def prompt_tokens(text: str) -> int:
    """Tokens of ChatTTS's prompt for `text`: its 4 control tokens, one per Chinese character and
    per punctuation mark (BERT's basic tokenizer splits each off: exact for Chinese text, checked
    against the tokenizer in tests/test_textsets.py), one per Latin-script word (an estimate: a
    rare word splits into several WordPieces of the real vocabulary, unknown here)."""
    return (
        PROMPT_CONTROL_TOKENS + len(_CJK.findall(text)) + len(_PUNCT.findall(text)) + len(_WORD.findall(text))
    )


def lengths(name: str) -> list[tuple[float, int]]:
    """Each text of built-in set `name` as (seconds of speech, prompt tokens), in the set's order."""
    if name not in TEXT_SETS:
        raise KeyError(name)
    return [(expected_seconds(t), prompt_tokens(t)) for t in TEXT_SETS[name]]
