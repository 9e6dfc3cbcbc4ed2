"""Issue 35, item 2: every count, rate and duration flag has a bound named in one line, exit 2, and
a duration takes a unit everywhere (flag, variable, file), as --slo does."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from ttsperf.bench.settings import BenchSettings
from ttsperf.cli.main import app

runner = CliRunner()
U = "http://127.0.0.1:9"  # nothing listens: every check here comes before a request
DURATION = "expected a duration with a unit (us, ms, s or min), e.g. 300ms or 2s"


def _refused(command: str, timeout: float = 60) -> str:
    """The command as a user types it, in its own process (a bound that failed would grow without
    end in this one): exit 2, one line on stderr, returned."""
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ttsperf", *shlex.split(command)[1:]],
                       capture_output=True, text=True, timeout=timeout)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and not r.stdout.strip(), (r.returncode, r.stdout, r.stderr)
    assert time.monotonic() - start < 30
    return lines[0]


def test_bench_concurrency_of_a_hundred_million_is_refused_naming_the_bound():
    line = _refused("ttsperf bench http://127.0.0.1:9 --concurrency 100000000 --requests 3")
    assert line.startswith("error: --concurrency 100000000: expected at most 100,000 requests in flight")


def test_plan_predict_of_a_hundred_million_streams_is_refused_at_once():
    line = _refused('ttsperf plan --predict --gpus "RTX 3090" --streams 100000000')
    assert line.startswith("error: --streams 100000000: expected at most 1,000,000 streams")


def test_plan_step_overhead_without_a_unit_is_refused():
    line = _refused("ttsperf plan --step-overhead 3")
    assert line == f"error: --step-overhead '3': {DURATION}"
    assert "at most 1s" in _refused("ttsperf plan --step-overhead 3s")  # seconds a step: a slip


def test_slo_without_a_unit_is_still_refused():
    line = _refused("ttsperf bench http://127.0.0.1:9 --slo ttfa_p99=300")
    assert line == (
        "error: --slo 'ttfa_p99=300': give a time unit (ms or s), e.g. 300ms; a bare number is ambiguous"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["bench", U, "--timeout", "3"], "--timeout '3': expected a duration with a unit"),
        (["bench", U, "--duration", "60"], "--duration '60': expected a duration with"),
        (["bench", U, "--users", "2", "--think-time", "2"], "--think-time '2': expected a"),
        (["bench", U, "--users", "2", "--ramp-up", "8"], "--ramp-up '8': expected a"),
        (["bench", U, "--telemetry-interval", "1"], "--telemetry-interval '1': expected"),
        (["plan", "--think-time", "2"], "--think-time '2': expected a duration with a unit"),
        (["plan", "--predict", "--users", "2", "--ramp-up", "8"], "--ramp-up '8': expected a duration"),
        (["plan", "--vocoder-overhead", "2"], "--vocoder-overhead '2': expected a duration with a unit"),
        (["bench", U, "--users", "100001"], "--users 100001: expected at most 100,000"),
        (["bench", U, "--rate", "1e6"], "--rate 1000000: expected at most 100,000"),
        (["bench", U, "--rate", "1000", "--duration", "1h"], "expected a duration"),
        (["bench", U, "--rate", "1000", "--duration", "20min"], "1,200,000 arrivals"),
        (["bench", U, "--requests", "2000000"], "--requests 2000000: expected at most"),
        (
            ["bench", U, "--timeout", "2min", "--concurrency", "1", "--think-time", "61min"],
            "--think-time 3660s: expected at most 3,600s (an hour)",
        ),  # fmt: skip
        (["bench", U, "--pcm-rate", "0"], "--pcm-rate 0: expected a sample rate"),
        (["plan", "--rate", "1e9"], "--rate 1000000000: expected at most 10,000 requests/s"),
        (["plan", "--users", "2000000"], "--users 2000000: expected at most 1,000,000 users"),
        (["plan", "--requests", "1000000"], "--requests 1000000: expected at most 100,000"),
        (["plan", "--audio-seconds", "3600"], "--audio-seconds 3600: expected at most 600 s"),
        (["plan", "--memory-at", "100000000"], "--memory-at 100000000: expected at most 65,536"),
        (["profile", "--batches", "1,100000000"], "--batches 100000000: expected at most 65,536"),
        (["profile", "--repeats", "100000000"], "--repeats 100000000: expected at most 10,000"),
        (["synth", "hi", "--synthetic", "--max-new-tokens", "100000000"], "--max-new-tokens 100000000: exp"),
        (["synth", "hi", "--synthetic", "--top-k", "0"], "--top-k 0: expected"),
    ],
)
def test_a_flag_past_its_bound_or_without_its_unit_is_one_line_naming_it(args, said):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], r.stderr


def test_a_duration_takes_its_unit_in_a_flag_a_variable_and_a_file(tmp_path, monkeypatch):
    s, _ = BenchSettings.resolve({"think_time": "300ms", "ramp_up": "1.5min", "timeout": "2s"})
    assert (s.think_time, s.ramp_up, s.timeout) == (0.3, 90.0, 2.0)
    monkeypatch.setenv("TTSPERF_BENCH_TIMEOUT", "5")
    r = runner.invoke(app, ["bench", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and r.stderr.strip() == (f"error: TTSPERF_BENCH_TIMEOUT='5': {DURATION}")
    monkeypatch.delenv("TTSPERF_BENCH_TIMEOUT")
    f = tmp_path / "b.toml"
    f.write_text("[bench]\ntimeout = 5\n")
    r = runner.invoke(app, ["bench", U, "--settings", str(f)])
    assert r.exit_code == 2 and r.stderr.strip().endswith(
        '[bench]: timeout = 5: expected a duration with a unit, e.g. "5s"'
    )
    f.write_text('[bench]\ntimeout = "5s"\n')
    assert BenchSettings.resolve({}, f)[0].timeout == 5.0
