"""`ttsperf serve --ray` flags: one line and exit 2 before Ray starts; without Ray installed, the
command says how to install it. The deployment itself runs in test_ray_serve.py."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.errors import UserError
from ttsperf.server.ray_deployment import RaySettings, ReplicaSpec, parse_autoscale

from .ray_live import needs_ray

runner = CliRunner()


def serve(*args: str):
    return runner.invoke(app, ["serve", "--synthetic", "--config", "tiny", *args])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--replicas", "2"], "--replicas needs --ray"),
        (["--address", "auto"], "--address needs --ray"),
        (["--ray", "--replicas", "2", "--autoscale", "1:4"], "--replicas and --autoscale: give one"),
        (["--ray", "--replicas", "0"], "--replicas 0: expected at least 1"),
        (["--ray", "--autoscale", "4"], "--autoscale '4': expected MIN:MAX replicas, e.g. 1:4"),
        (["--ray", "--autoscale", "3:2"], "--autoscale '3:2': expected 0 <= MIN <= MAX"),
        (["--ray", "--max-queued", "0"], "--max-queued 0: expected at least 1"),
        (["--ray", "--port", "0"], "--port 0: --ray needs a fixed port"),
        (["--ray", "--device", "cuda", "--gpus-per-replica", "0"], "--gpus-per-replica 0: expected > 0"),
        (["--ray", "--config", "huge"], "--config 'huge': expected one of"),
    ],
)
@needs_ray
def test_bad_ray_flags_exit_2_with_one_line(args, says):
    result = serve(*args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and says in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_without_ray_installed_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.split(".")[0] == "ray" else real(name, *a)
    )
    result = serve("--ray")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: --ray needs Ray Serve: pip install 'ttsperf[ray]' (or pip install 'ray[serve]')"
    )


def test_autoscale_parses_min_max():
    assert parse_autoscale("1:4") == (1, 4)
    assert parse_autoscale("0:2") == (0, 2)
    with pytest.raises(UserError):
        parse_autoscale("0:0")


@needs_ray
def test_deployment_options_follow_the_flags():
    from ttsperf.engine.config import EngineConfig
    from ttsperf.model.spec import ModelSpec

    tiny = ModelSpec(synthetic=True, config="tiny")
    spec = ReplicaSpec(tiny, engine=EngineConfig(max_batch=8))
    fixed = RaySettings(replicas=3, gpus_per_replica=1, max_queued=10, retry_after=2.5).options(spec)
    assert fixed["num_replicas"] == 3 and "autoscaling_config" not in fixed
    assert fixed["max_ongoing_requests"] == 8 and fixed["max_queued_requests"] == 10
    assert fixed["ray_actor_options"] == {"num_cpus": 0.0, "num_gpus": 1}
    assert fixed["backpressure_config"].retry_after_s == 2.5
    scaled = RaySettings(autoscale=(1, 4)).options(spec)
    assert "num_replicas" not in scaled
    assert scaled["autoscaling_config"] == dict(
        min_replicas=1, max_replicas=4, initial_replicas=1, target_ongoing_requests=4
    )
    auto = ReplicaSpec(tiny)
    assert RaySettings().options(auto)["max_ongoing_requests"] == 64  # --max-batch auto's cap
