"""One precedence for bench, serve, plan and profile: defaults < --settings FILE < TTSPERF_<CMD>_* <
flags, each setting written once as a field from which the command's flag is made (ttsperf.settings).
bench's own layering, run end to end against a server, is in tests/bench/test_bench_settings.py."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from ttsperf.bench.settings import BenchSettings
from ttsperf.cli.main import app
from ttsperf.errors import UserError
from ttsperf.plan.api import make_plan
from ttsperf.plan.settings import PlanSettings
from ttsperf.profile.settings import ProfileSettings
from ttsperf.server.settings import ServeSettings
from ttsperf.settings import flag_name, flag_of, names_that_differ

runner = CliRunner()
MODELS = {"bench": BenchSettings, "serve": ServeSettings, "plan": PlanSettings, "profile": ProfileSettings}

SHARED = """
[bench]
concurrency = [1, 4]
[serve]
max_batch = 16
cuda_graphs = true
[plan]
streams = 50
gpus = "T4,L4"
[profile]
batches = [1, 8]
"""


@pytest.mark.parametrize("command", MODELS)
def test_every_setting_is_a_flag_of_its_command_with_the_fields_help(command):
    """The flags are made from the fields: none missing, none written apart (its help is the field's)."""
    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    for name, field in MODELS[command].model_fields.items():
        assert flag_name(name, field) in out or flag_of(field).argument, name
        assert field.description.split()[0] in out, name
    assert f"TTSPERF_{command.upper()}_<OPTION>" in out and "--settings FILE" in out


def test_one_file_sets_each_command_from_its_own_table(tmp_path):
    f = tmp_path / "ttsperf.toml"
    f.write_text(SHARED, encoding="utf-8")
    assert BenchSettings.resolve({}, f)[0].concurrency == [1, 4]
    serve, src = ServeSettings.resolve({}, f)
    assert serve.max_batch == 16 and serve.cuda_graphs is True and src["cuda_graphs"] == "file"
    assert serve.engine_config().max_batch == 16 and serve.switches().cuda_graphs is True
    plan = PlanSettings.resolve({}, f)[0]
    assert (plan.streams, plan.gpus) == (50, "T4,L4")
    assert ProfileSettings.resolve({}, f)[0].batches == [1, 8]


def test_variables_lie_over_the_file_and_flags_over_both(tmp_path, monkeypatch):
    f = tmp_path / "ttsperf.toml"
    f.write_text(SHARED, encoding="utf-8")
    monkeypatch.setenv("TTSPERF_SERVE_MAX_BATCH", "auto")
    monkeypatch.setenv("TTSPERF_PROFILE_BATCHES", "2,4")
    monkeypatch.setenv("TTSPERF_PLAN_STREAMS", "80")
    serve, src = ServeSettings.resolve({}, f)
    assert serve.max_batch is None and src["max_batch"] == "env"  # auto: from free memory
    assert ProfileSettings.resolve({}, f)[0].batches == [2, 4]
    plan, src = PlanSettings.resolve({"streams": 120}, f)
    assert plan.streams == 120 and src["streams"] == "flag" and src["gpus"] == "file"
    assert src["seed"] == "default"


def test_the_serve_defaults_are_the_engines():
    from ttsperf.engine.config import EngineConfig, Switches

    s = ServeSettings()
    assert s.engine_config() == EngineConfig() and s.switches() == Switches()


def test_plan_from_a_settings_file_is_the_plan_from_the_same_flags(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"scenario": "realtime", "streams": 20, "gpus": "T4", "requests": 100}))
    by_file = runner.invoke(app, ["plan", "--settings", str(f), "--json"])
    by_flags = runner.invoke(
        app,
        ["plan", "--scenario", "realtime", "--streams", "20", "--gpus", "T4", "--requests", "100", "--json"],
    )
    assert by_file.exit_code == 0 and by_flags.exit_code == 0, by_file.output + by_flags.output
    same = [json.loads(r.stdout) for r in (by_file, by_flags)]
    same.append(make_plan(PlanSettings(scenario="realtime", streams=20, gpus="T4", requests=100)).dump())
    sources = [plan["inputs"].pop("settings_sources") for plan in same]
    assert sources[0]["streams"] == "file" and sources[1]["streams"] == "flag" and sources[2] == {}
    assert same[0]["inputs"]["settings"]["streams"] == 20  # resolved once, written into the result
    for plan in same:
        plan.pop("created")
    assert same[0] == same[1] == same[2]


def test_a_profile_records_its_settings_and_where_each_came_from(monkeypatch):
    monkeypatch.setenv("TTSPERF_PROFILE_PROMPTS", "8")
    monkeypatch.setenv("TTSPERF_PROFILE_REPEATS", "2")
    args = ["profile", "--synthetic", "--config", "tiny", "--batches", "1", "--contexts", "16", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    prof = json.loads(r.stdout)
    assert prof["settings"]["batches"] == [1] and prof["settings"]["repeats"] == 2
    src = prof["settings_sources"]
    assert (src["batches"], src["prompts"], src["repeats"], src["quick"]) == ("flag", "env", "env", "default")
    assert {p["prompt_tokens"] for p in prof["prefill"]} == {8}


def test_quick_sets_the_grid_and_says_so(monkeypatch):
    monkeypatch.setenv("TTSPERF_PROFILE_PROMPTS", "8")
    s, src = ProfileSettings.resolve({"quick": True})
    q = s.check()
    assert (q.batches, q.prompts, q.repeats) == ([1, 4], [16, 64], 3) and src["prompts"] == "env"
    q.batches.append(99)  # the copy owns its lists: --quick's own stay as they are
    assert ProfileSettings(quick=True).check().batches == [1, 4]


def test_a_flag_undoes_what_a_file_switched_on(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text("[bench]\nstream = true\ngpu = false\n[serve]\ncuda_graphs = true\n", encoding="utf-8")
    r = runner.invoke(app, ["bench", "http://127.0.0.1:1", "--settings", str(f), "--no-stream", "--gpu",
                            "--requests", "1", "--json"])  # fmt: skip
    run = json.loads(r.stdout)  # every request fails (nothing listens): exit 1, the settings still written
    assert run["config"]["stream"] is False and run["config"]["gpu"] is True
    assert run["config_sources"]["stream"] == "flag"
    assert ServeSettings.resolve({"cuda_graphs": False}, f)[0].cuda_graphs is False


def test_a_plan_file_may_name_profiles_at_its_top(tmp_path):
    f = tmp_path / "plan.toml"
    f.write_text('profile = ["a.json", "b.json"]\nstreams = 5\n', encoding="utf-8")
    s, src = PlanSettings.resolve({}, f)  # `profile` here is plan's setting, not [profile]'s table
    assert s.profile == ["a.json", "b.json"] and s.streams == 5 and src["profile"] == "file"


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("s.json", "[1, 2]", "expected a table of settings at the top, found list"),
        ("s.json", "null", "expected a table of settings at the top, found NoneType"),
        ("s.json", '"ab"', "expected a table of settings at the top, found str"),
        ("s.toml", "api_key = 12345\n", "api_key = '<hidden>': expected text"),
    ],
)
def test_odd_files_are_one_line_and_secrets_stay_hidden(tmp_path, name, text, says):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(says)) as err:
        ServeSettings.resolve({}, f)
    assert "12345" not in str(err.value)


def test_an_empty_json_file_is_no_settings(tmp_path):
    f = tmp_path / "s.json"
    f.write_text("", encoding="utf-8")
    assert PlanSettings.resolve({}, f)[1]["streams"] == "default"


SERVE, PLAN = ["serve", "--synthetic"], ["plan"]
BAD = [
    (SERVE, {"TTSPERF_SERVE_PORT": "70000"}, "--port 70000: expected 0 to 65535 (set by TTSPERF_SERVE_PORT)"),
    (
        SERVE,
        {"TTSPERF_SERVE_MAX_BATCH": "0"},
        "TTSPERF_SERVE_MAX_BATCH='0': expected a positive integer or auto",
    ),
    (SERVE, {"TTSPERF_API_KEY": "k"}, "TTSPERF_API_KEY: renamed TTSPERF_SERVE_API_KEY"),
    (SERVE, {"TTSPERF_SERVE_MAXBATCH": "8"}, "TTSPERF_SERVE_MAXBATCH: unknown setting"),
    (PLAN, {"TTSPERF_PLAN_STREAMS": "many"}, "TTSPERF_PLAN_STREAMS='many': expected an integer"),
    (
        [*PLAN, "--predict", "--gpus", "T4"],
        {"TTSPERF_PLAN_SCENARIO": "realtime", "TTSPERF_PLAN_STREAMS": "4"},
        "--predict: --scenario not used",
    ),
    (
        ["profile", "--synthetic"],
        {"TTSPERF_PROFILE_BATCHES": "1,0"},
        "--batches '1,0': expected positive integers, e.g. 1,4,16 (set by TTSPERF_PROFILE_BATCHES)",
    ),
    (
        ["bench", "http://127.0.0.1:1"],
        {"TTSPERF_BENCH_CONCURRENCY": "1,x"},
        "TTSPERF_BENCH_CONCURRENCY='1,x': expected integers separated by commas",
    ),
]


@pytest.mark.parametrize(("args", "env", "says"), BAD)
def test_a_bad_setting_is_one_line_naming_where_it_was_set(args, env, says):
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1
    assert says in result.output


def test_a_settings_file_of_another_shape_is_refused_by_name(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("[serve]\nmax_batch = 8\n[plan]\nstreems = 3\n", encoding="utf-8")
    with pytest.raises(
        UserError, match=r"s.toml \[plan\]: unknown setting 'streems'; expected one of profile"
    ):
        PlanSettings.resolve({}, f)
    assert ServeSettings.resolve({}, f)[0].max_batch == 8  # its own table is fine


def test_library_calls_name_the_flag_of_a_bad_keyword():
    with pytest.raises(TypeError, match="settings or keyword arguments, not both"):
        make_plan(PlanSettings(), streams=5)
    assert PlanSettings.build(profile=None, price=None).profile == []  # None: no list, as before
    with pytest.raises(UserError, match="--streams 'x': expected an integer"):
        make_plan(streams="x")
    with pytest.raises(
        UserError, match="plan settings: stream: extra inputs are not permitted|stream: Extra"
    ):
        make_plan(stream=5)


def test_the_api_key_is_never_printed():
    s = ServeSettings.resolve({"api_key": "s3cret"})[0]
    assert s.key() == "s3cret" and "s3cret" not in repr(s) and "s3cret" not in str(s.model_dump())


def test_the_readme_settings_file_sets_what_it_says(tmp_path):
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml\n# ttsperf.toml\n", 1)[1].split("```", 1)[0]
    f = tmp_path / "ttsperf.toml"
    f.write_text(block, encoding="utf-8")
    serve = ServeSettings.resolve({}, f)[0]
    assert (serve.device, serve.dtype, serve.max_batch, serve.cuda_graphs) == ("cuda", "fp16", 64, True)
    bench = BenchSettings.resolve({}, f)[0]  # the URL from the file: `bench --settings FILE` runs
    assert bench.concurrency == [1, 8, 32] and bench.stream and bench.requests == 400
    bench.validate()
    plan = PlanSettings.resolve({}, f)[0].check()
    assert (plan.scenario, plan.streams) == ("realtime", 200)


README = (__import__("pathlib").Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


def test_the_readme_names_every_setting_whose_name_is_not_its_flags():
    """The README says a flag is the setting of the same name and lists the exceptions; the list is
    the models' own, so a field renamed apart from its flag fails here until the README says so."""
    differ = [(m.command(), typed, name) for m in MODELS.values() for typed, name in names_that_differ(m)]
    assert differ == [("bench", "URLS", "urls")]
    for _command, typed, name in differ:
        assert f"{typed} is `{name}`" in README and f"TTSPERF_BENCH_{name.upper()}" in README
    # the examples: each spelled as its flag, in a file and in a variable
    for flag, key in (("--format", "format"), ("--header", "header"), ("--audio-check", "audio_check")):
        field = BenchSettings.model_fields[key]
        assert flag_name(key, field) == flag


def test_every_repeatable_flags_variable_is_named_as_the_readme_says(monkeypatch):
    repeatable = {
        f"{m.model_config['env_prefix']}{name.upper()}": (m, name)
        for m in MODELS.values()
        for name, field in m.model_fields.items()
        if flag_of(field).repeat
    }
    said = re.search(r"a repeatable flag's variable \(([^)]+)\)", README.replace("\n  ", " ")).group(1)
    assert sorted(re.findall(r"`(TTSPERF_\w+)`", said)) == sorted(repeatable)
    for var, (model, name) in repeatable.items():
        monkeypatch.setenv(var, "x")
        if model is BenchSettings:
            monkeypatch.setenv(var, "A: 1")
        value = getattr(model.resolve({})[0], name)
        assert value in (["x"], ["A: 1"]), var
        monkeypatch.delenv(var)


def test_the_readme_file_keys_are_the_flags_names(tmp_path):
    f = tmp_path / "b.toml"
    f.write_text('format = "pcm"\naudio_check = false\nheader = "A: 1"\nurls = "http://h:1"\n')
    s = BenchSettings.resolve({}, f)[0]
    assert (s.format, s.audio_check, s.header, s.urls) == ("pcm", False, ["A: 1"], ["http://h:1"])
