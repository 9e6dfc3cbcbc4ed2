"""Telemetry on the run clock, and --find-max against a real server."""

from __future__ import annotations

import pytest

from ttsperf.bench.api import BenchSettings, run_bench
from ttsperf.bench.telemetry import Telemetry, aggregate, parse_prometheus


def test_no_gpu_is_said_once_and_the_run_goes_on(server_factory):
    pytest.importorskip("pynvml")
    srv = server_factory(slots=0, service_time=0.01)
    tele = Telemetry(0.0)
    if tele._nvml:
        pytest.skip("this machine has a GPU")
    run = run_bench(BenchSettings(urls=[srv.url], concurrency=[1, 2], requests=5))
    assert run.points[1].successes == 5
    assert len([n for n in run.telemetry_notes if "GPU" in n]) == 1


@pytest.mark.slow
def test_server_process_and_prometheus_are_sampled_inside_the_window(server_factory, tmp_path):
    # 0.2 s per request: all 4 stay in flight far longer than a loaded client takes between them
    # (at 0.05 s a CI run under load sampled at most 2 in flight)
    srv = server_factory(slots=0, service_time=0.2)
    cfg = BenchSettings(urls=[srv.url], concurrency=[4], requests=24, gpu=False, server_pid=srv.proc.pid)
    cfg.metrics_url, cfg.telemetry_interval = srv.url + "/metrics", 0.05
    run = run_bench(cfg)
    assert run.telemetry_notes == []
    samples = run.telemetry
    assert len(samples) >= 5 and all("proc_rss_bytes" in s and "prom:mock_in_flight" in s for s in samples)
    p = run.points[0]
    # the server's own in-flight gauge, sampled on the run clock, saw the load (4 in flight)
    t0 = min(r.t_send for r in run.records)
    inside = [s["prom:mock_in_flight"] for s in samples if t0 + 0.1 <= s["t"] <= t0 + p.window_s - 0.1]
    assert inside and max(inside) == 4
    assert p.telemetry["proc_rss_max"] > 1e6 and "proc_cpu_pct_mean" in p.telemetry
    from ttsperf.bench.charts import write_charts

    assert "server.png" in [w.name for w in write_charts(run, tmp_path)]


def test_unreachable_metrics_url_is_noted_once(server_factory, free_port_url):
    srv = server_factory(slots=0, service_time=0.01)
    run = run_bench(
        BenchSettings(
            urls=[srv.url],
            requests=5,
            gpu=False,
            metrics_url=free_port_url + "/metrics",
            telemetry_interval=0.05,
        )
    )
    assert run.points[0].successes == 5
    assert len(run.telemetry_notes) == 1 and "--metrics-url" in run.telemetry_notes[0]


def test_prometheus_text_and_window_aggregation():
    prom = parse_prometheus(
        '# HELP x\nDCGM_FI_DEV_GPU_UTIL{gpu="0"} 80\nDCGM_FI_DEV_GPU_UTIL{gpu="1"} 60\nup 1\n'
    )
    assert prom == {"DCGM_FI_DEV_GPU_UTIL": 140.0, "up": 1.0}
    rows = [(0, 0.0, 1, 0), (1, 0.9, 5, 100), (2, 0.7, 3, 300), (9, 0.0, 9, 900)]
    samples = [{"t": t, "gpu_util": u, "gpu_mem_bytes": m, "gpu_energy_j": e} for t, u, m, e in rows]
    agg = aggregate(samples, 0.5, 2.5, audio_s=20.0)
    assert agg["gpu_util_mean"] == pytest.approx(0.8) and agg["gpu_mem_max"] == 5
    assert agg["gpu_joules_per_audio_s"] == pytest.approx(200 / 20)


@pytest.mark.slow
def test_find_max_concurrency_against_a_single_slot_server(server_factory):
    # One slot, S = 50 ms: latency at concurrency C is about C x 50 ms, so e2e_p50 <= 175 ms (3.5 S,
    # half a service time from either edge) allows C = 3 and not 4.
    srv = server_factory(slots=1, service_time=0.05)
    run = run_bench(
        BenchSettings(
            urls=[srv.url], concurrency=[1, 16], requests=20, find_max=True, slo="e2e_p50=175ms", gpu=False
        )
    )
    assert run.find_max["max_passing"] == 3 and run.find_max["first_failing"] == 4
    assert run.slo.passed
    assert [pr["load"] for pr in run.find_max["probes"]][:3] == [1, 2, 4]


@pytest.mark.slow
def test_find_max_rate_against_a_single_slot_server(server_factory):
    # One slot, S = 50 ms: it serves 20 req/s. Above that the backlog grows by (S - 1/rate) per
    # request, so of 40 constant arrivals the median one waits ~20 x (S - 1/rate) + S: that crosses
    # the 0.5 s bound near 36 req/s, and below 20 req/s it is ~S. The bound sits 0.45 s above the
    # unloaded latency, so a loaded test machine's stalls move the edge only a little (to ~27 req/s
    # for 0.2 s of stalls at the median). Each probe is its 40 requests: past capacity, a probe
    # left undecided would otherwise add ~1,700 more at the same rate (2 minutes of a growing
    # backlog; test_bench_cli.py covers adding requests to decide).
    srv = server_factory(slots=1, service_time=0.05)
    run = run_bench(
        BenchSettings(urls=[srv.url], rate=[12.0], arrival="constant", requests=40, find_max=True,
                    slo="e2e_p50=500ms", gpu=False, until_decided=False)
    )  # fmt: skip
    fm = run.find_max
    assert fm["dimension"] == "rate"
    assert 20.0 <= fm["max_passing"] <= 40.0 and fm["max_passing"] < fm["first_failing"] <= 48.0, fm
    assert [pr["load"] for pr in fm["probes"]][:3] == [12.0, 24.0, 48.0]
    assert run.slo.passed
