"""How to ask a given TTS server for speech: one small class per API, selected by `--adapter`.

An adapter only builds the HTTP request and says what kind of body comes back; sending, timing
and checking are the runner's, so every adapter is measured the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ttsperf.bench.texts import Item
from ttsperf.errors import UserError

KINDS = ("wav", "pcm", "mp3", "ogg", "flac", "zip-mp3")


@dataclass
class HttpRequest:
    method: str
    url: str
    json: Any = None
    params: dict[str, str] | None = None


@dataclass
class AdapterOptions:
    response_format: str = "wav"  # openai: wav, pcm, mp3, opus or flac
    stream: bool = False
    voice: str = "default"
    model: str = "chattts"
    pcm_rate: int = 24_000
    template_body: str | None = None
    template_kind: str = "wav"
    extra: dict[str, Any] = field(default_factory=dict)


class Adapter:
    name = ""
    default_path = "/"
    kind = "wav"  # what the body is: wav, pcm, mp3, ogg, flac, zip-mp3

    def __init__(self, opts: AdapterOptions) -> None:
        self.opts = opts

    def endpoint(self, base: str) -> str:
        """A bare `http://host:port` gets the API's usual path; a URL with a path is used as is."""
        parts = urlsplit(base)
        return base if parts.path not in ("", "/") else base.rstrip("/") + self.default_path

    def build(self, base: str, item: Item) -> HttpRequest:
        raise NotImplementedError


class InvokeAdapter(Adapter):
    """The guide's server: POST {"text": ...} -> WAV."""

    name, default_path = "invoke", "/invoke"

    def build(self, base: str, item: Item) -> HttpRequest:
        return HttpRequest("POST", self.endpoint(base), json={"text": item.text, **item.extra})


class OpenAIAdapter(Adapter):
    """OpenAI-compatible `/v1/audio/speech`, read chunk by chunk; every format bench can check."""

    name, default_path = "openai", "/v1/audio/speech"
    # response_format -> body kind; OpenAI's "opus" is Ogg Opus. AAC is left out: no decoder here.
    FORMATS = {"wav": "wav", "pcm": "pcm", "mp3": "mp3", "opus": "ogg", "flac": "flac"}

    def __init__(self, opts: AdapterOptions) -> None:
        super().__init__(opts)
        if opts.response_format not in self.FORMATS:
            raise UserError(f"--format {opts.response_format!r}: expected one of {', '.join(self.FORMATS)}")
        self.kind = self.FORMATS[opts.response_format]

    def build(self, base: str, item: Item) -> HttpRequest:
        body = {"model": self.opts.model, "input": item.text, "voice": self.opts.voice,
                "response_format": self.opts.response_format}  # fmt: skip
        if self.opts.stream:
            body["stream"] = True
        return HttpRequest("POST", self.endpoint(base), json={**body, **item.extra})


class ChatTTSApiAdapter(Adapter):
    """ChatTTS's own examples/api server: POST /generate_voice -> a zip of MP3 files."""

    name, default_path, kind = "chattts-api", "/generate_voice", "zip-mp3"

    def build(self, base: str, item: Item) -> HttpRequest:
        # audio_seed and text_seed are required fields of that API's request model.
        body = {
            "text": [item.text],
            "stream": False,
            "skip_refine_text": True,
            "audio_seed": 12345678,
            "text_seed": 87654321,
            "params_refine_text": {"prompt": ""},
            "params_infer_code": {"prompt": "[speed_5]", "spk_emb": None},
        }
        return HttpRequest("POST", self.endpoint(base), json={**body, **item.extra})


class ForgeAdapter(Adapter):
    """Speech-AI-Forge: GET /v1/tts?text=...&format=wav."""

    name, default_path = "forge", "/v1/tts"

    def build(self, base: str, item: Item) -> HttpRequest:
        params = {"text": item.text, "format": "wav", **{k: str(v) for k, v in item.extra.items()}}
        return HttpRequest("GET", self.endpoint(base), params=params)


class TemplateAdapter(Adapter):
    """Any JSON API: `--template-body '{"input": "{text}", "voice": "a"}'`, POSTed to the URL as given."""

    name = "template"

    def __init__(self, opts: AdapterOptions) -> None:
        super().__init__(opts)
        if not opts.template_body:
            raise UserError('--adapter template needs --template-body, e.g. \'{"input": "{text}"}\'')
        if "{text}" not in opts.template_body:
            raise UserError(f"--template-body {opts.template_body!r}: has no {{text}} placeholder")
        try:
            json.loads(opts.template_body.replace("{text}", "x"))
        except json.JSONDecodeError as exc:
            raise UserError(f"--template-body: not JSON once {{text}} is filled in ({exc.msg})") from None
        if opts.template_kind not in KINDS:
            raise UserError(f"--template-kind {opts.template_kind!r}: expected one of {', '.join(KINDS)}")
        self.kind = opts.template_kind

    def endpoint(self, base: str) -> str:
        return base

    def build(self, base: str, item: Item) -> HttpRequest:
        # json.dumps(...)[1:-1] escapes quotes and newlines so any text stays valid inside the string.
        body = self.opts.template_body.replace("{text}", json.dumps(item.text, ensure_ascii=False)[1:-1])
        return HttpRequest("POST", base, json=json.loads(body))


ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (InvokeAdapter, OpenAIAdapter, ChatTTSApiAdapter, ForgeAdapter, TemplateAdapter)
}


def make_adapter(name: str, opts: AdapterOptions) -> Adapter:
    if name not in ADAPTERS:
        raise UserError(f"--adapter {name!r}: unknown; expected one of {', '.join(ADAPTERS)}")
    if opts.stream and name not in STREAMING:  # it would be ignored: TTFA = the whole response
        raise UserError(
            f"--stream: the {name} adapter's API cannot be asked to stream (its time to first audio is "
            f"the whole response); use --adapter {' or '.join(STREAMING)}"
            + (", or put the server's own stream field in --template-body" if name == "template" else "")
        )
    return ADAPTERS[name](opts)


STREAMING = ("openai",)  # the adapters whose request can ask for a streamed response (--stream)
CHUNKED = ("ttfa", "gap", "underrun")  # the metrics of a reply that arrives in chunks of audio


def streamed(adapter: str, stream: bool) -> bool:
    """Whether replies can arrive in chunks of audio: --stream, or a template whose body may ask
    the server to stream. The others' replies come whole: their first audio is the whole response."""
    return stream or adapter == "template"


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"URL {url!r}: expected http://HOST[:PORT][/PATH]")
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError:
        raise UserError(f"URL {url!r}: the port is not a number in 1..65535") from None
    return url
