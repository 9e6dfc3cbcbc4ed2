"""What `/openapi.json` says about the synthesis endpoints: their JSON bodies, their audio answers
and every error they can give, so that a client generator or a schema fuzzer (schemathesis, in
tests/reliability) sees the contract the handlers enforce.

Bodies are parsed by hand in app.py (the size limit must apply before parsing), so FastAPI cannot
derive the request schema from the handler's signature; it is attached here from the same pydantic
models that validate the body.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ttsperf.server.schemas import FORMATS, MODEL_IDS, SEED_MAX, SPEED_RANGE, STREAM_FORMATS, VOICES


class ErrorDetail(BaseModel):
    type: str
    message: str
    field: str | None
    model_config = {"extra": "allow"}  # e.g. `limit` on a 413


class ErrorBody(BaseModel):
    error: ErrorDetail


def _error(description: str, retry: bool = False) -> dict:
    out: dict = {"description": description, "model": ErrorBody}
    if retry:
        out["headers"] = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}}
    return out


AUTH_ERRORS = {401: _error("missing or wrong API key (only when the server has one)")}
SYNTH_ERRORS = {
    400: _error("the body is not the JSON object described; `field` names what is wrong"),
    **AUTH_ERRORS,
    408: _error("the body did not arrive within the server's read timeout"),
    413: _error("the body or the prompt is too long; `limit` says the bound"),
    503: _error("queue full, out of memory or draining: try again", retry=True),
    504: _error("the request's deadline passed before its audio was complete"),
}
_BINARY = {"schema": {"type": "string", "format": "binary"}}
# OpenAPI 3.1 has a text/event-stream schema describe one event (3.2's itemSchema says it outright)
_SSE_EVENT = {
    "schema": {
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "description": '{"type": "speech.audio.delta", "audio": base64} events, then one '
                '{"type": "speech.audio.done", "usage": ...} or {"type": "error", "error": ...}',
            }
        },
    }
}


def audio_ok(media: tuple[str, ...]) -> dict:
    content = {m: _SSE_EVENT if m == "text/event-stream" else _BINARY for m in media}
    return {200: {"description": "the audio", "content": content}}


# Constraints the validators check by hand (schemas.py), stated for the reader of the schema.
_DOCUMENTED = {
    "model": {"enum": list(MODEL_IDS)},
    "voice": {"enum": list(VOICES)},
    "response_format": {"enum": list(FORMATS)},
    "stream_format": {"enum": list(STREAM_FORMATS)},
    "speed": {"minimum": SPEED_RANGE[0], "maximum": SPEED_RANGE[1]},
    "text": {"pattern": r"\S"},
    "input": {"pattern": r"\S"},
}


def request_body(model: type[BaseModel]) -> dict:
    """`openapi_extra` for a route whose JSON body `model` validates."""
    schema = model.model_json_schema()
    for name, extra in _DOCUMENTED.items():
        if name in schema["properties"]:
            schema["properties"][name].update(extra)
    if "stream_format" in schema["properties"]:  # the one rule across fields (app.py's speech)
        schema["not"] = {
            "required": ["stream", "stream_format"],
            "properties": {"stream": {"const": False}, "stream_format": {"const": "sse"}},
        }
    for option in schema["properties"]["seed"]["anyOf"]:  # pydantic writes 2**63 - 1 as a float
        if option["type"] == "integer":
            option["maximum"] = SEED_MAX
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


class ModelCard(BaseModel):
    id: str
    object: str = "model"
    created: int = 0
    owned_by: str = "ttsperf"
    root: str


class ModelList(BaseModel):
    object: str = "list"
    data: list[ModelCard] = Field(default_factory=list)
