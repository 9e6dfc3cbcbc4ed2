"""Every command the docs show runs as pasted (issue 25): the README's and each command's `--help`
examples (tests/docs_examples.py collects them from the README and the typer app, so a new
example is run without editing this file) run in bash in a scratch folder that holds what they
name: a profile (profile.json, prof.json, gpu_profile.json), a host profile (host.json), a plan
(plans/), bench runs (runs/), a tiny asset directory (./asset), texts, price quotes and TensorRT
shapes, the README's ttsperf.toml. The URL
`http://127.0.0.1:8080` is a real server on loopback: `ttsperf serve --synthetic --config tiny` for
doctor, bench's mock TTS server for bench (hundreds of requests in seconds; bench on the tiny
server is tests/bench/test_bench_cli.py::test_on_a_tiny_server_the_bare_p99_command_ends_pass).

What each example must do here, decided by rule from the command itself:
- `--device cuda` (or the README's file that says cuda): exit 2 with one line naming CUDA, on this
  CPU; benchmarks/gpu_check.py runs the GPU path on a GPU.
- `serve`: start, answer /healthz, drain on SIGTERM and exit 0.
- `serve --ray`, `demo` and `profile --host`: run by the test named in ELSEWHERE (minutes each).
- `profile` without --config: on the tiny config (TTSPERF_PROFILE_CONFIG=tiny), as chattts's grid
  takes over 10 minutes on this 2-core machine.
- bench's `--duration` over 5 s: 5 s a point, the same flags otherwise (two README examples hold
  each rate 60 s: 4 of this file's 10 minutes); tests/bench times a point by its duration.
- anything else: exit 0 (bench with a GPU limit: 3, nothing measured it here; doctor: 0 or 1, as
  this machine's findings are), no traceback, and every `-o` path written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tests.docs_examples import README, all_examples, help_examples, readme_examples

ROOT = Path(__file__).parents[1]
EXAMPLES = all_examples()
DOCS_URL = "http://127.0.0.1:8080"
ELSEWHERE = {
    "serve --ray": "tests/server/test_ray_cli.py",  # a local Ray cluster of tiny replicas
    "demo": "tests/test_demo.py",  # demo --quick: minutes of serving and planning
    # every part, size and mode, compiled: 2 minutes warm, over 20 with a cold Inductor cache
    "profile --host": "tests/profile/test_host.py",  # the same command on fewer sizes, uncompiled
}
MAX_DURATION_S = 5  # a bench point's duration here: the load loop is the same at 5 s as at 60 s
FAST = ("info", "doctor")  # seconds each; the rest load a model, plan 20 cards or send thousands of requests


# Beyond exit 0: what some examples must print (stdout starts with the first needle, holds the rest)
# or write. The README table's checks (tests/test_readme.py names these), run here once.
PRINTS = {
    "ttsperf info --config chattts": ("", "279,657,740"),  # the parameters the README says info counts
    "ttsperf plan --profile profile.json --scenario realtime --streams 200": (
        "answer, realtime (",  # the answer first
        "RTX 4090 (fit)",  # the profiled card, fitted
    ),
}
WRITES = {"ttsperf assets make-random ./asset --config chattts --seed 0": "asset/gpt/config.json"}


def _needs_gpu(ex) -> bool:
    serve_file = ex.subcommand == "serve" and "--settings ttsperf.toml" in ex.command  # [serve] device=cuda
    return "--device cuda" in ex.command or serve_file


def _param(ex):
    slow = ex.subcommand not in FAST or "--duration" in ex.command or "--probe" in ex.command
    return pytest.param(ex, id=ex.command[8:70], marks=[pytest.mark.slow] if slow else [])


def test_the_examples_are_found_in_the_readme_and_every_commands_help():
    where = {ex.where for ex in help_examples() + readme_examples()}
    for command in ("bench", "plan", "doctor", "profile", "export onnx", "report", "serve", "info"):
        assert f"ttsperf {command} --help" in where, command
    assert "README" in where and "README table" in where
    assert len(EXAMPLES) >= 60  # the README and the helps show this many distinct commands today


@pytest.mark.parametrize("command", sorted(ELSEWHERE))
def test_examples_run_elsewhere_are_run_there(command):
    text = (ROOT / ELSEWHERE[command]).read_text(encoding="utf-8")
    assert command.split()[-1] in text


def _readme_toml(url: str) -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("```toml\n# ttsperf.toml\n", 1)[1].split("```", 1)[0].replace(DOCS_URL, url)


@pytest.fixture(scope="module")
def servers():
    from tests.bench.conftest import Server
    from tests.server.helpers import ServeProcess

    mock = Server(slots=0, service_time=0.005)
    tiny = ServeProcess("--synthetic", "--config", "tiny", "--max-batch", "4")
    yield {"mock": mock.url, "tiny": tiny.url}
    mock.stop()
    tiny.stop()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, servers) -> Path:
    """What the examples name, made once: copied into each example's own folder."""
    from tests.plan.conftest import make_profile

    from ttsperf.bench.api import run_bench
    from ttsperf.bench.results import write_outputs
    from ttsperf.bench.settings import BenchSettings

    ws = tmp_path_factory.mktemp("docs")
    prof = json.dumps(make_profile(device="RTX 4090").dump())
    for name in ("profile.json", "prof.json", "gpu_profile.json"):
        (ws / name).write_text(prof)
    run = run_bench(BenchSettings(urls=[servers["mock"]], concurrency=[1], requests=20, gpu=False))
    for folder in ("runs/b0", "runs/gpu", "runs/bench-4090", "runs/demo"):
        write_outputs(run, ws / folder)
    (ws / "my_texts.txt").write_text("你好，世界。\nhello there, how are you today?\n", encoding="utf-8")
    (ws / "shapes.txt").write_text("--minShapes=codes:1x4 --optShapes=codes:2x4 --maxShapes=codes:8x4\n")
    for quotes in ("my_alibaba_prices.csv", "my_quotes.csv"):
        shutil.copy(ROOT / "src/ttsperf/data/prices.csv", ws / quotes)
    shutil.copy(ROOT / "src/ttsperf/data/host-amd-epyc.json", ws / "host.json")  # profile --host's file
    (ws / "ttsperf.toml").write_text(_readme_toml(servers["mock"]), encoding="utf-8")
    env = _env()
    for cmd in ("ttsperf assets make-random ./asset --config tiny --seed 0",
                "ttsperf plan --scenario realtime --gpus T4 -o plans/"):  # fmt: skip
        done = subprocess.run(
            ["bash", "-c", cmd], cwd=ws, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
    return ws


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTSPERF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["KEY"] = "docs-example-key"
    return env


def _command(ex, servers) -> str:
    url = servers["tiny"] if ex.subcommand == "doctor" and "--probe" not in ex.command else servers["mock"]
    cmd = ex.command.replace(DOCS_URL, url).replace("http://chattts-api:8000", servers["mock"])
    cmd = re.sub(r"--port \d+", "--port 0", cmd)
    return re.sub(r"--duration (\d+)s\b", lambda m: f"--duration {min(int(m[1]), MAX_DURATION_S)}s", cmd)


def _expected(ex) -> set[int]:
    if _needs_gpu(ex):
        return {2}
    if ex.subcommand == "bench" and "gpu_" in ex.command:
        return {3}  # a GPU limit nothing measured on this CPU: inconclusive, never a pass
    if ex.subcommand == "doctor" and "--url" not in ex.command and "--probe" not in ex.command:
        return {0, 1}  # this machine's findings decide
    return {0}


def _serve(cmd: str, cwd: Path) -> None:
    proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], cwd=cwd, env=_env(), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)  # fmt: skip
    log = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            log.append(proc.stderr.readline())
            if "serving on http://" in log[-1]:
                break
        url = log[-1].split("serving on ")[1].split()[0]
        with urllib.request.urlopen(f"{url}/healthz", timeout=30) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, "".join(log)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("ex", [_param(ex) for ex in EXAMPLES if ex.subcommand not in ELSEWHERE])
def test_the_example_runs_as_pasted(ex, servers, workspace, tmp_path):
    cwd = tmp_path / "w"
    shutil.copytree(workspace, cwd)
    cmd = _command(ex, servers)
    if ex.subcommand == "serve" and not _needs_gpu(ex):
        _serve(cmd, cwd)
        return
    env = _env()
    if ex.subcommand == "assets make-random":  # it refuses the workspace's ./asset without --force
        shutil.rmtree(cwd / "asset")
    if ex.subcommand == "profile" and "--config" not in ex.command:
        # chattts's grid takes over 10 minutes on 2 cores: the same flags on the tiny config
        env["TTSPERF_PROFILE_CONFIG"] = "tiny"
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    said = r.stdout + r.stderr
    assert r.returncode in _expected(ex), f"{ex.where}: {ex.command}\nexit {r.returncode}\n{said[-3000:]}"
    assert "Traceback" not in said, said[-3000:]
    if _needs_gpu(ex):
        said = [ln for ln in r.stderr.strip().splitlines() if not re.match(r"\d{4}-\d\d-\d\d .* INFO ", ln)]
        assert re.search("cuda", r.stderr, re.I) and len(said) == 1, r.stderr  # beside start-up logs
        return
    words = ex.words
    for i, w in enumerate(words[:-1]):
        if w in ("-o", "--out"):
            assert (cwd / words[i + 1]).exists(), (ex.command, words[i + 1])
            if words[i + 1].endswith(".wav"):
                assert (cwd / words[i + 1]).read_bytes()[:4] == b"RIFF", ex.command
    first, *rest = PRINTS.get(ex.command, ("",))
    assert r.stdout.startswith(first) and all(n in r.stdout for n in rest), (ex.command, r.stdout[:2000])
    if ex.command in WRITES:
        assert (cwd / WRITES[ex.command]).is_file(), ex.command
    if "--slo" in words and "--json" not in words:
        assert "SLO: " in r.stdout, r.stdout
