"""defaults < config file < TTSPERF_BENCH_* environment < flags, and where each value came from."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.bench.config import resolve
from ttsperf.cli.main import app
from ttsperf.errors import UserError


def test_each_layer_overrides_the_one_below(tmp_path):
    f = tmp_path / "bench.toml"
    f.write_text('urls = ["http://a:1"]\nconcurrency = [2, 8]\nrequests = 5\ntimeout = 9\n', encoding="utf-8")
    env = {"TTSPERF_BENCH_REQUESTS": "7", "TTSPERF_BENCH_STREAM": "true", "OTHER": "x"}
    cfg, src = resolve({"timeout": 3.0}, f, env)
    assert cfg.urls == ["http://a:1"] and cfg.concurrency == [2, 8]
    assert cfg.requests == 7 and cfg.stream is True and cfg.timeout == 3.0 and cfg.warmup == 0
    assert src["concurrency"] == "file" and src["requests"] == "env" and src["timeout"] == "flag"
    assert src["warmup"] == "default"


def test_json_file_and_env_lists(tmp_path):
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"rate": [1, 2.5], "arrival": "gamma:2"}), encoding="utf-8")
    cfg, _ = resolve({}, f, {"TTSPERF_BENCH_URLS": "http://a:1,http://b:2"})
    assert cfg.rate == [1.0, 2.5] and cfg.urls == ["http://a:1", "http://b:2"]


@pytest.mark.parametrize(
    ("name", "text", "env", "match"),
    [
        ("b.toml", "concurency = [2]\n", {}, "unknown setting 'concurency'"),
        ("b.toml", "requests = 'many'\n", {}, "requests: 'many' is not a valid"),
        ("b.toml", "requests = [\n", {}, "not TOML"),
        ("b.yaml", "x: 1\n", {}, "expected a .toml or .json"),
        ("b.toml", "", {"TTSPERF_BENCH_WARMUP": "two"}, "TTSPERF_BENCH_WARMUP: 'two'"),
        ("b.toml", "", {"TTSPERF_BENCH_SPEED": "1"}, "TTSPERF_BENCH_SPEED: unknown setting"),
    ],
)
def test_bad_settings_name_the_place(tmp_path, name, text, env, match):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=match):
        resolve({}, f, env)


def test_cli_uses_the_file_and_records_sources(server_factory, tmp_path, monkeypatch):
    srv = server_factory(slots=0, service_time=0.01)
    f = tmp_path / "bench.toml"
    f.write_text(f'urls = ["{srv.url}"]\nrequests = 4\nconcurrency = [2]\n', encoding="utf-8")
    monkeypatch.setenv("TTSPERF_BENCH_WARMUP", "1")
    out = tmp_path / "r"
    res = CliRunner().invoke(
        app, ["bench", "--config", str(f), "--requests", "3", "--no-gpu", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    run = json.loads((out / "run.json").read_text())
    assert run["points"][0]["requests"] == 3 and run["points"][0]["warmup"] == 1
    assert run["config_sources"]["requests"] == "flag" and run["config_sources"]["warmup"] == "env"
    assert run["config_sources"]["urls"] == "file" and run["config"]["concurrency"] == [2]


def test_cli_without_any_url_is_a_usage_error():
    res = CliRunner().invoke(app, ["bench", "--no-gpu"])
    assert res.exit_code == 2 and "give at least one server URL" in res.stderr
