"""Every kind of bad input gets a 4xx with the one JSON error shape, naming the field and what was
expected; none gets a 500 (also fuzzed with hypothesis over the JSON body)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from .helpers import SHORT, start_live

SPEECH, INVOKE = "/v1/audio/speech", "/invoke"
TOO_LONG = "你好" * 300  # 600 characters -> 600+ tokens, over the 512-token prompt limit

# (id, path, body: dict | bytes, status, field, words the message must contain)
CASES = [
    ("empty text", INVOKE, {"text": ""}, 400, "text", "at least 1 character"),
    ("whitespace text", INVOKE, {"text": " \n\t "}, 400, "text", "only whitespace"),
    ("whitespace input", SPEECH, {"input": "   "}, 400, "input", "only whitespace"),
    ("only prompt markers", INVOKE, {"text": "[Stts][empty_spk]"}, 400, "text", "prompt markers"),
    ("lone surrogate", INVOKE, b'{"text": "\\ud800"}', 400, "text", "unicode string"),
    ("missing text", INVOKE, {"seed": 1}, 400, "text", "required"),
    ("missing input", SPEECH, {"voice": "alloy"}, 400, "input", "required"),
    ("text over the limit", INVOKE, {"text": TOO_LONG}, 413, "text", "at most 512"),
    ("input over the limit", SPEECH, {"input": TOO_LONG}, 413, "input", "at most 512"),
    ("invalid JSON", INVOKE, b'{"text": ', 400, None, "invalid JSON"),
    ("not UTF-8", INVOKE, b'{"text": "\xff\xfe"}', 400, None, "invalid JSON"),
    ("empty body", SPEECH, b"", 400, None, "invalid JSON"),
    ("array body", INVOKE, b'["text"]', 400, None, "expected a JSON object, found an array"),
    ("text not a string", INVOKE, {"text": 5}, 400, "text", "valid string, found 5"),
    ("input not a string", SPEECH, {"input": ["a"]}, 400, "input", "valid string, found an array"),
    ("temperature a string", SPEECH, {"input": SHORT, "temperature": "hot"}, 400, "temperature", "number"),
    ("top_k a float", INVOKE, {"text": SHORT, "top_k": 1.5}, 400, "top_k", "integer"),
    ("seed a boolean", INVOKE, {"text": SHORT, "seed": True}, 400, "seed", "integer, found true"),
    ("stream a string", SPEECH, {"input": SHORT, "stream": "yes"}, 400, "stream", "boolean"),
    (
        "unknown voice",
        SPEECH,
        {"input": SHORT, "voice": "darth"},
        400,
        "voice",
        "expected one of default, alloy",
    ),
    ("unknown model", SPEECH, {"input": SHORT, "model": "tts-9"}, 400, "model", "expected one of chattts"),
    (
        "mp3",
        SPEECH,
        {"input": SHORT, "response_format": "mp3"},
        400,
        "response_format",
        "supported: wav, pcm",
    ),
    (
        "opus",
        SPEECH,
        {"input": SHORT, "response_format": "opus"},
        400,
        "response_format",
        "supported: wav, pcm",
    ),
    (
        "unknown format",
        SPEECH,
        {"input": SHORT, "response_format": "ogg"},
        400,
        "response_format",
        "wav, pcm",
    ),
    (
        "unknown stream format",
        SPEECH,
        {"input": SHORT, "stream_format": "ws"},
        400,
        "stream_format",
        "audio, sse",
    ),
    (
        "sse not streamed",
        SPEECH,
        {"input": SHORT, "stream_format": "sse", "stream": False},
        400,
        "stream",
        "sse",
    ),
    (
        "temperature too high",
        SPEECH,
        {"input": SHORT, "temperature": 2.5},
        400,
        "temperature",
        "less than or equal to 2",
    ),
    (
        "temperature negative",
        INVOKE,
        {"text": SHORT, "temperature": -0.1},
        400,
        "temperature",
        "greater than or equal",
    ),
    ("top_p zero", SPEECH, {"input": SHORT, "top_p": 0}, 400, "top_p", "greater than 0"),
    ("top_p above one", INVOKE, {"text": SHORT, "top_p": 1.01}, 400, "top_p", "less than or equal to 1"),
    ("top_p NaN", INVOKE, b'{"text": "hi", "top_p": NaN}', 400, "top_p", "found nan"),
    ("top_k zero", SPEECH, {"input": SHORT, "top_k": 0}, 400, "top_k", "greater than or equal to 1"),
    ("seed negative", SPEECH, {"input": SHORT, "seed": -1}, 400, "seed", "greater than or equal to 0"),
    ("seed too big", SPEECH, {"input": SHORT, "seed": 2**64}, 400, "seed", "less than or equal"),
    ("speed too slow", SPEECH, {"input": SHORT, "speed": 0.1}, 400, "speed", "from 0.25 to 4.0"),
    ("speed too fast", SPEECH, {"input": SHORT, "speed": 9}, 400, "speed", "from 0.25 to 4.0"),
    ("unknown field", SPEECH, {"input": SHORT, "temprature": 0.5}, 400, "temprature", "unknown field"),
    ("body over the size limit", INVOKE, {"text": SHORT, "pad": "x" * 70_000}, 413, None, "at most 65536"),
]


def post(client, path: str, body: dict | bytes, **kw):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=content, headers={"Content-Type": "application/json", **kw})


def check_error(r, status: int, field: str | None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert set(error) >= {"type", "message", "field"} and error["field"] == field
    return error


@pytest.mark.parametrize(
    ("path", "body", "status", "field", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_a_4xx_naming_the_field(live, path, body, status, field, says):
    with live.client() as c:
        error = check_error(post(c, path, body), status, field)
    assert says in error["message"], error["message"]
    if field is not None:
        assert error["message"].startswith(f"{field}:")  # the message names the field too


def test_text_over_the_limit_says_the_limit_in_the_body(live):
    with live.client() as c:
        error = check_error(post(c, INVOKE, {"text": TOO_LONG}), 413, "text")
    assert error["limit"] == 512 and error["tokens"] > 512


def test_unknown_endpoint_and_wrong_method_use_the_same_shape(live):
    with live.client() as c:
        check_error(c.get("/v2/nothing"), 404, None)
        check_error(c.get(INVOKE), 405, None)


@pytest.fixture(scope="module")
def keyed():
    """One server with an API key for the cases below: none of them reaches its engine."""
    server = start_live(api_key="s3cret")
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({}, "missing API key"),
        ({"Authorization": "Bearer wrong"}, "wrong API key"),
        ({"Authorization": "Basic czNjcmV0"}, "missing API key"),  # only the bearer scheme carries it
        ({"X-API-Key": "s3cret-but-longer"}, "wrong API key"),
    ],
    ids=["missing", "wrong bearer", "other scheme", "wrong x-api-key"],
)
def test_a_missing_or_wrong_api_key_is_401(keyed, headers, says):
    server = keyed
    with server.client() as c:
        for path, body in ((INVOKE, {"text": SHORT}), (SPEECH, {"input": SHORT})):
            r = post(c, path, body, **headers)
            error = check_error(r, 401, "authorization")
            assert says in error["message"] and r.headers["www-authenticate"] == "Bearer"
        check_error(c.get("/v1/models", headers=headers), 401, "authorization")
        assert server.engine.stats.requests.total() == 0  # refused before reaching the engine


# -- fuzz: whatever JSON a client sends, the answer is never a 5xx

FIELDS = ["text", "input", "model", "voice", "response_format", "speed", "stream_format", "stream", "seed"]
FIELDS += ["temperature", "top_p", "top_k"]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["wav", "pcm", "mp3", "sse", "audio", "alloy", "chattts", "你好", "[Stts]", " "])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
BODIES = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), JSON, max_size=6)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@FUZZ
@given(path=st.sampled_from([INVOKE, SPEECH]), body=BODIES)
def test_fuzzed_json_bodies_never_get_a_5xx(live, path, body):
    with live.client() as c:
        content = json.dumps(body, allow_nan=True).encode()
        r = post(c, path, content)
    event(f"status {r.status_code}")
    assert r.status_code < 500, (body, r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert r.json()["error"]["message"]


@pytest.mark.slow
@FUZZ
@given(path=st.sampled_from([INVOKE, SPEECH]), content=st.binary(max_size=64))
def test_fuzzed_raw_bodies_never_get_a_5xx(live, path, content):
    with live.client() as c:
        r = post(c, path, content)
    assert r.status_code < 500, (content, r.status_code, r.text[:300])


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(min_size=1, max_size=24),
    extra=st.dictionaries(st.sampled_from(FIELDS[5:]), SCALARS, max_size=3),
)
def test_fuzzed_texts_reach_the_engine_and_never_get_a_5xx(live, text, extra):
    """Any Unicode (controls, emoji, markers, other scripts) with mostly valid settings: either
    audio or a 4xx, never an engine failure."""
    with live.client() as c:
        r = post(c, SPEECH, {"input": text, **extra, "stream": False})
    event(f"status {r.status_code}")  # --hypothesis-show-statistics: how many reached the engine
    assert r.status_code < 500, (text, extra, r.status_code, r.text[:300])
    if r.status_code == 200:
        assert int(r.headers["x-decode-steps"]) >= 1
