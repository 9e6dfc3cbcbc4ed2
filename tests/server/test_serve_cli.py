"""`ttsperf serve` flags: help with an example, bad values refused in one line before any model
loads (the running server itself is tested in test_lifecycle.py, SIGTERM included)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.server.schemas import SpeechRequest

runner = CliRunner()


def test_help_shows_an_example_and_the_options():
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    assert "Example: ttsperf serve --synthetic" in result.output
    for option in ("--assets", "--synthetic", "--max-batch", "--max-queue", "--request-timeout", "--api-key",
                   "--max-prompt-tokens", "--max-new-tokens"):  # fmt: skip
        assert option in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--synthetic", "--max-batch", "0"], "--max-batch '0': expected a positive integer or auto"),
        (["--synthetic", "--max-batch", "many"], "--max-batch 'many'"),
        (["--synthetic", "--port", "70000"], "--port 70000: expected 0 to 65535"),
        (["--synthetic", "--request-timeout", "0"], "--request-timeout 0.0: expected a positive"),
        (["--synthetic", "--read-timeout", "-1"], "--read-timeout -1.0: expected a positive"),
        (["--synthetic", "--max-queue", "0"], "--max-queue 0: expected at least 1"),
        (["--synthetic", "--max-prompt-tokens", "0"], "--max-prompt-tokens 0: expected at least 1"),
        (["--synthetic", "--dtype", "fp8"], "--dtype 'fp8'"),
        (["--synthetic", "--api-key", " "], "--api-key is empty"),
        ([], "give exactly one of --assets DIR or --synthetic"),
    ],
)
def test_bad_flags_exit_2_with_one_line(args, says):
    result = runner.invoke(app, ["serve", "--config", "tiny", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_a_taken_port_is_one_line_before_any_model_loads():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # chattts's full-size synthetic weights would take many seconds to build: refused first
        result = runner.invoke(app, ["serve", "--synthetic", "--port", str(port), "--log-level", "error"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == [f"error: --port {port}: 127.0.0.1:{port} cannot be bound (Address already in use); "
                     "stop what holds it, or pick another port (0: any free one)"]  # fmt: skip


@pytest.mark.parametrize(("speed", "token"), [(0.25, 0), (0.5, 2), (1.0, 5), (2.0, 8), (4.0, 9)])
def test_openai_speed_maps_onto_chattts_speed_tokens(speed, token):
    assert SpeechRequest(input="hi", speed=speed).speed_prompt() == f"[speed_{token}]"


def test_integer_fields_take_integral_json_numbers_only():
    """JSON has one number type: 239.0 is the integer 239 (as JSON Schema says); 1.5, true, "3" are not."""
    body = SpeechRequest.model_validate({"input": "hi", "top_k": 239.0, "seed": 7.0})
    assert (body.top_k, body.seed) == (239, 7) and type(body.top_k) is int and type(body.seed) is int
    for bad in ({"top_k": 1.5}, {"top_k": True}, {"top_k": "3"}, {"seed": 2.5}, {"seed": float("inf")}):
        with pytest.raises(ValidationError):
            SpeechRequest.model_validate({"input": "hi", **bad})
