"""defaults < settings file < TTSPERF_BENCH_* environment < flags, and where each value came from."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.bench.api import BenchSettings
from ttsperf.cli.main import app
from ttsperf.errors import UserError


def test_each_layer_overrides_the_one_below(tmp_path, monkeypatch):
    f = tmp_path / "bench.toml"
    f.write_text(
        'urls = ["http://a:1"]\nconcurrency = [2, 8]\nrequests = 5\ntimeout = "9s"\n', encoding="utf-8"
    )
    for k, v in {"TTSPERF_BENCH_REQUESTS": "7", "TTSPERF_BENCH_STREAM": "true", "OTHER": "x"}.items():
        monkeypatch.setenv(k, v)
    cfg, src = BenchSettings.resolve({"timeout": 3.0}, f)
    assert cfg.urls == ["http://a:1"] and cfg.concurrency == [2, 8]
    assert cfg.requests == 7 and cfg.stream is True and cfg.timeout == 3.0 and cfg.warmup == 0
    assert src["concurrency"] == "file" and src["requests"] == "env" and src["timeout"] == "flag"
    assert src["warmup"] == "default"


def test_built_in_code_it_reads_no_environment(monkeypatch):
    monkeypatch.setenv("TTSPERF_BENCH_REQUESTS", "7")
    assert BenchSettings(urls=["http://a:1"]).requests is None


def test_json_file_and_env_lists(tmp_path, monkeypatch):
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"rate": [1, 2.5], "arrival": "gamma:2"}), encoding="utf-8")
    monkeypatch.setenv("TTSPERF_BENCH_URLS", "http://a:1,http://b:2")
    monkeypatch.setenv("TTSPERF_BENCH_HEADER", "Accept: audio/wav, audio/*")  # repeatable: one item
    cfg, _ = BenchSettings.resolve({}, f)
    assert cfg.rate == [1.0, 2.5] and cfg.urls == ["http://a:1", "http://b:2"]
    assert cfg.header == ["Accept: audio/wav, audio/*"]
    monkeypatch.setenv("TTSPERF_BENCH_HEADER", '["A: 1", "B: 2"]')  # several: a JSON list
    assert BenchSettings.resolve({}, f)[0].header == ["A: 1", "B: 2"]


def test_one_file_holds_a_table_per_command(tmp_path):
    f = tmp_path / "ttsperf.toml"
    f.write_text("[bench]\nrequests = 400\n[serve]\nmax_batch = 64\n", encoding="utf-8")
    cfg, src = BenchSettings.resolve({}, f)
    assert cfg.requests == 400 and src["requests"] == "file"
    f.write_text("[serve]\nport = 9000\n", encoding="utf-8")  # no [bench] table: bench's defaults
    assert BenchSettings.resolve({}, f)[0].requests is None


@pytest.mark.parametrize(
    ("name", "text", "env", "match"),
    [
        ("b.toml", "concurency = [2]\n", {}, "unknown setting 'concurency'"),
        ("b.toml", "requests = 'many'\n", {}, "requests = 'many': expected an integer"),
        ("b.toml", "concurrency = [1, 'x']\n", {}, r"concurrency = \[1, 'x'\]: expected integers"),
        ("b.toml", "requests = [\n", {}, "not TOML"),
        ("b.json", "{", {}, "not JSON"),
        ("b.yaml", "x: 1\n", {}, "expected a .toml or .json"),
        ("b.toml", "requests = 4\n[bench]\nwarmup = 1\n", {}, "'requests' sits beside the tables bench"),
        ("b.toml", "", {"TTSPERF_BENCH_WARMUP": "two"}, "TTSPERF_BENCH_WARMUP='two': expected an integer"),
        (
            "b.toml",
            "",
            {"TTSPERF_BENCH_STREAM": "maybe"},
            "TTSPERF_BENCH_STREAM='maybe': expected true or false",
        ),
        ("b.toml", "", {"TTSPERF_BENCH_SPEED": "1"}, "TTSPERF_BENCH_SPEED: unknown setting"),
    ],
)
def test_bad_settings_name_the_place(tmp_path, monkeypatch, name, text, env, match):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UserError, match=match):
        BenchSettings.resolve({}, f)


def test_a_missing_settings_file_is_named(tmp_path):
    with pytest.raises(UserError, match="--settings .*nope.toml: no such file"):
        BenchSettings.resolve({}, tmp_path / "nope.toml")


def test_cli_uses_the_file_and_records_sources(server_factory, tmp_path, monkeypatch):
    srv = server_factory(slots=0, service_time=0.01)
    f = tmp_path / "bench.toml"
    f.write_text(f'urls = ["{srv.url}"]\nrequests = 4\nconcurrency = [2]\n', encoding="utf-8")
    monkeypatch.setenv("TTSPERF_BENCH_WARMUP", "1")
    out = tmp_path / "r"
    res = CliRunner().invoke(
        app, ["bench", "--settings", str(f), "--requests", "3", "--no-gpu", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    run = json.loads((out / "run.json").read_text())
    assert run["points"][0]["requests"] == 3 and run["points"][0]["warmup"] == 1
    assert run["config_sources"]["requests"] == "flag" and run["config_sources"]["warmup"] == "env"
    assert run["config_sources"]["urls"] == "file" and run["config"]["concurrency"] == [2]
    assert run["config_sources"]["gpu"] == "flag" and run["config"]["gpu"] is False  # --no-gpu


def test_cli_flags_that_do_not_parse_name_the_flag():
    res = CliRunner().invoke(app, ["bench", "http://127.0.0.1:1", "--concurrency", "1,x"])
    assert res.exit_code == 2 and "--concurrency '1,x': expected integers separated by commas" in res.stderr


def test_cli_without_any_url_is_a_usage_error():
    res = CliRunner().invoke(app, ["bench", "--no-gpu"])
    assert res.exit_code == 2 and "give at least one server URL" in res.stderr


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"rate": [2.0], "think_time": 1.0}, "--think-time 1s: expected seconds >= 0 with --concurrency"),
        ({"concurrency": [2], "think_time": -1.0}, "--think-time -1s: expected seconds >= 0"),
    ],
)
def test_think_time_belongs_to_a_closed_loop_of_listeners(kw, match):
    with pytest.raises(UserError, match=match):
        BenchSettings(urls=["http://127.0.0.1:1"], **kw).validate()
    ok = BenchSettings(urls=["http://127.0.0.1:1"], concurrency=[2, 4], think_time=0.5)
    ok.validate()
    assert [s.label for s in ok.strategies()] == ["concurrent@2,think0.5s", "concurrent@4,think0.5s"]


def test_users_are_a_closed_loop_of_listeners_who_think_0_s_unless_told():
    users = BenchSettings(urls=["http://127.0.0.1:1"], users=[2, 8])
    users.validate()
    assert [s.label for s in users.strategies()] == ["concurrent@2,think0s", "concurrent@8,think0s"]
    thinking = BenchSettings(urls=["http://127.0.0.1:1"], users=[3], think_time=2.0)
    assert [s.label for s in thinking.strategies()] == ["concurrent@3,think2s"]
    back_to_back = BenchSettings(urls=["http://127.0.0.1:1"], concurrency=[3])
    assert [s.label for s in back_to_back.strategies()] == ["concurrent@3"]  # not listeners


def test_a_ramp_up_is_a_closed_loops_and_is_named_in_its_label():
    ramped = BenchSettings(urls=["http://127.0.0.1:1"], users=[8], ramp_up=4.0)
    ramped.validate()
    assert [s.label for s in ramped.strategies()] == ["concurrent@8,think0s,ramp4s"]
    assert ramped.strategies()[0].ramp_s == 4.0
    at_once = BenchSettings(urls=["http://127.0.0.1:1"], concurrency=[8])
    assert at_once.strategies()[0].ramp_s is None and at_once.strategies()[0].label == "concurrent@8"


@pytest.mark.parametrize(
    "kw",
    [
        {"rate": [1.0], "ramp_up": 2.0},
        {"concurrency": [4], "ramp_up": -1.0},
        {"users": [4], "ramp_up": float("nan")},
    ],
)
def test_a_ramp_up_refuses_an_open_loop_and_a_negative_time(kw):
    with pytest.raises(UserError, match="--ramp-up .*: expected seconds >= 0 with --concurrency or --users"):
        BenchSettings(urls=["http://127.0.0.1:1"], **kw).validate()


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"users": [2], "concurrency": [2]}, "--users and --concurrency: choose one"),
        ({"users": [2], "rate": [1.0]}, "--users and --rate: choose one"),
        ({"users": [0]}, r"--users \[0\]: every value must be >= 1"),
    ],
)
def test_users_refuse_a_second_load_or_no_user(kw, match):
    with pytest.raises(UserError, match=match):
        BenchSettings(urls=["http://127.0.0.1:1"], **kw).validate()
