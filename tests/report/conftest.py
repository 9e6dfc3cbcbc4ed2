"""Real results for the report tests, made once per session in seconds: a profile of the tiny
model, `profile --optimizations` rows of the tiny model (in this process), a bench run against the
mock TTS server on loopback (with its process telemetry), and a plan from the profile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ttsperf.bench.api import BenchSettings, run_bench
from ttsperf.bench.results import write_outputs
from ttsperf.plan.api import make_plan
from ttsperf.profile.measure import profile_model
from ttsperf.profile.optimizations import VARIANTS, run_variant

from .chromium import find_chromium


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser the page tests read the report in. None is a failure, never a skip: the report
    is only proven by a browser, and a skipped test would let a machine without one look green."""
    exe = find_chromium()
    if exe is None:
        pytest.fail(
            "no Chromium: `make test` installs Debian's chromium (tests/report/ensure_chromium.sh, as root); "
            "otherwise apt-get install chromium, or set TTSPERF_CHROMIUM=/path/to/chromium"
        )
    return exe


def _mock_server():
    args = [sys.executable, "-m", "ttsperf.bench.mock_server", "--port", "0", "--slots", "2",
            "--service-time", "0.05"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"mock server did not start: {line!r}")
    return proc, line.split()[-1]


@pytest.fixture(scope="session")
def results(tmp_path_factory, tiny_pipe) -> Path:
    """A folder laid out like a demo's: profile.json, optimizations.json, bench/run.json, plan.json."""
    root = tmp_path_factory.mktemp("results")
    prof = profile_model(tiny_pipe, batches=[1, 2, 4], contexts=[16, 64], prompts=[8], repeats=2, warmup=1)
    (root / "profile.json").write_text(json.dumps(prof.dump(), indent=2))
    rows = [{**run_variant(v, "tiny", "cpu", 2, 32, 2), "guide_claim": v.guide_claim} for v in VARIANTS]
    (root / "optimizations.json").write_text(json.dumps(rows, indent=2))
    proc, url = _mock_server()
    try:
        cfg = BenchSettings(urls=[url], concurrency=[1, 2, 4], requests=20, warmup=1, server_pid=proc.pid,
                          slo="e2e_p50=2s", telemetry_interval=0.1)  # fmt: skip
        run = run_bench(cfg)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    write_outputs(run, root / "bench")
    plan = make_plan(profile=[str(root / "profile.json")], scenario="realtime", streams=20,
                     gpus="T4,RTX 4090,A100 40GB PCIe,L4", requests=200)  # fmt: skip
    (root / "plan.json").write_text(json.dumps(plan.dump(), indent=2))
    return root


@pytest.fixture(scope="session")
def partial_demo(tmp_path_factory) -> Path:
    """`ttsperf demo --quick --config tiny` with Ctrl-C arriving as the serving stage starts."""
    from typer.testing import CliRunner

    from ttsperf.cli import demo_serving
    from ttsperf.cli.main import app

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path_factory.mktemp("partial_demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(demo_serving, "launch_server", interrupted)
        res = CliRunner().invoke(app, ["demo", "--quick", "--config", "tiny", "-o", str(out)])
    assert res.exit_code == 130, res.output
    (out / "output.txt").write_text(res.output)
    return out


@pytest.fixture(scope="session")
def every_scenario(results, tmp_path_factory) -> Path:
    """`results` with a plan of every scenario over the whole shipped catalog, as `make demo` plans:
    the three answer boxes and the Pareto charts at their most crowded (about 20 cards each)."""
    root = tmp_path_factory.mktemp("every_scenario")
    for name in ("profile.json", "optimizations.json", "bench"):
        src = results / name
        (root / name).symlink_to(src, target_is_directory=src.is_dir())
    plan = make_plan(profile=[str(root / "profile.json")], requests=200)
    (root / "plan.json").write_text(json.dumps(plan.dump(), indent=2))
    return root
