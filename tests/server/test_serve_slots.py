"""`ttsperf serve`'s slots follow the limits it is given (--max-prompt-tokens, --max-new-tokens, as
plan prints them): the engine reserves that many tokens a slot, says so on /healthz, answers a longer
prompt 413 and serves one within it."""

from __future__ import annotations

import pytest

from .helpers import ServeProcess


@pytest.mark.slow
def test_serve_takes_the_limits_plan_prints_and_holds_requests_to_them():
    args = ("--synthetic", "--config", "tiny", "--max-batch", "4", "--max-prompt-tokens", "24",
            "--max-new-tokens", "30")  # fmt: skip
    with ServeProcess(*args) as srv, srv.client() as c:
        config = c.get("/healthz").json()["config"]
        assert (config["max_prompt_tokens"], config["max_new_tokens"]) == (24, 30)
        too_long = c.post("/invoke", json={"text": "你好" * 20})
        assert too_long.status_code == 413, too_long.text
        assert "expected at most 24" in too_long.text
        fits = c.post("/invoke", json={"text": "你好，世界。"})
        assert fits.status_code == 200, fits.text
