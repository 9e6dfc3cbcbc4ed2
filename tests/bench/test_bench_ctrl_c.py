"""Ctrl-C (SIGINT) ends a real `ttsperf bench` process within 5 s at every moment of a run, writing
what it measured: before the first request, during a ramp, with requests stuck on a server that
never answers, while telemetry waits on a scrape, and when the shell left SIGINT ignored (issue 35:
the cause of a test that once waited more than 30 s). A second Ctrl-C ends it at once.

Each test runs bench as a process and holds it to the promised 5 s (a behaviour bound: bench
typically ends in about 1.5 s, most of it drawing the charts)."""

from __future__ import annotations

import json

import pytest

from .bench_process import ENDS_WITHIN_S, SilentServer, ctrl_c, start_bench, wait_until


@pytest.fixture
def silent():
    srv = SilentServer()
    yield srv
    srv.close()


def written(out) -> dict:
    return json.loads((out / "run.json").read_text())


def assert_stopped(elapsed: float, proc, stdout: str, stderr: str) -> None:
    assert proc.returncode == 130, (proc.returncode, stdout[-500:], stderr[-2000:])
    assert elapsed < ENDS_WITHIN_S, f"Ctrl-C took {elapsed:.1f} s to end bench\n{stderr[-2000:]}"
    assert "interrupted: results cover the requests finished so far" in stdout


def test_before_the_first_request_while_reading_the_servers_settings(silent, tmp_path):
    """bench's first exchange is its /healthz read (up to 3 s): Ctrl-C there sends no load at all."""
    out = tmp_path / "run"
    proc = start_bench(silent.url, out, "--requests", "100", "--timeout", "60s")
    assert silent.next_line().startswith("GET /healthz ")
    elapsed, stdout, stderr = ctrl_c(proc)
    assert_stopped(elapsed, proc, stdout, stderr)
    data = written(out)
    assert data["interrupted"] is True and data["records"] == [] and data["points"] == []
    assert silent.lines.empty(), "a request was sent after Ctrl-C"


def test_with_every_request_stuck_on_a_server_that_never_answers(silent, tmp_path):
    out = tmp_path / "run"
    proc = start_bench(silent.url, out, "--requests", "100", "--concurrency", "4", "--timeout", "60s")
    assert silent.next_line().startswith("GET /healthz ")
    assert silent.next_line().startswith("POST /invoke ")  # the load has started: 60 s until a timeout
    elapsed, stdout, stderr = ctrl_c(proc)
    assert_stopped(elapsed, proc, stdout, stderr)
    data = written(out)
    # the requests in flight were never answered: no record, and no point judged on nothing
    assert data["interrupted"] is True and data["records"] == [] and data["points"] == []


def test_keeps_the_finished_requests_while_the_next_one_hangs(own_server, tmp_path):
    """12 texts answered, the 13th stalls for 30 s: Ctrl-C keeps exactly the 12."""
    srv = own_server(slots=1, service_time=0.05)  # its own: the stalled request holds the one slot
    texts = tmp_path / "texts.txt"
    texts.write_text("a short sentence to speak\n" * 12 + "this one stalls [fault:stall=30]\n")
    out = tmp_path / "run"
    proc = start_bench(srv.url, out, "--requests", "100", "--texts", str(texts), "--timeout", "60s")
    wait_until(lambda: (s := srv.stats())["served"] >= 12 and s["in_flight"] == 1, "the stalled request")
    elapsed, stdout, stderr = ctrl_c(proc)
    assert_stopped(elapsed, proc, stdout, stderr)
    data = written(out)
    assert len(data["records"]) == 12 and all(r["error"] is None for r in data["records"])
    assert data["points"][0]["successes"] == 12


def stop_mid_run(srv, out, *args: str, served: int, started=None, sigint_ignored: bool = False) -> dict:
    """bench against the mock `srv` for 1,000 requests, Ctrl-C once `served` are served (`started`:
    what to wait for first) -> run.json, checked: bench stopped as promised and kept the finished
    requests (a reply or two may still have been on its way)."""
    proc = start_bench(srv.url, out, "--requests", "1000", *args, sigint_ignored=sigint_ignored)
    if started is not None:
        started()
    wait_until(lambda: srv.stats()["served"] >= served, f"{served} requests served")
    elapsed, stdout, stderr = ctrl_c(proc)
    assert_stopped(elapsed, proc, stdout, stderr)
    data = written(out)
    n = len(data["records"])
    assert served - 2 <= n < 1000 and data["points"][0]["successes"] == n
    return data


def test_during_a_ramp_up(server_factory, tmp_path):
    """8 senders started over 16 s: Ctrl-C while most of them still wait for their turn."""
    srv = server_factory(slots=0, service_time=0.05)
    stop_mid_run(srv, tmp_path / "run", "--concurrency", "8", "--ramp-up", "16s", served=5)


def test_while_telemetry_waits_on_a_metrics_url_that_never_answers(server_factory, silent, tmp_path):
    def scraping() -> None:  # this scrape waits out its 2 s timeout; the load goes on meanwhile
        assert silent.next_line().startswith("GET /metrics ")

    srv = server_factory(slots=1, service_time=0.05)
    args = ("--metrics-url", silent.url + "/metrics", "--telemetry-interval", "1s")
    stop_mid_run(srv, tmp_path / "run", *args, served=5, started=scraping)


def test_when_started_with_sigint_ignored_as_a_script_backgrounds_it(server_factory, tmp_path):
    """The cause of the 30 s wait: `bench ... &` in a shell without job control (or a test runner
    started that way) inherits SIGINT ignored, and asyncio.run takes SIGINT only from Python's
    default handler, so Ctrl-C did nothing and the run went on to its 1,000th request."""
    srv = server_factory(slots=1, service_time=0.05)
    stop_mid_run(srv, tmp_path / "run", served=12, sigint_ignored=True)


def test_a_second_ctrl_c_ends_bench_at_once(server_factory, tmp_path):
    """After the first Ctrl-C bench writes its results (the charts take about a second); pressed
    again, it ends there, and run.json is whole or absent, never cut."""
    srv = server_factory(slots=1, service_time=0.05)
    out = tmp_path / "run"
    proc = start_bench(srv.url, out, "--requests", "1000")
    wait_until(lambda: srv.stats()["served"] >= 12, "12 requests served")
    elapsed, stdout, stderr = ctrl_c(proc, repeat_every=0.1)
    assert proc.returncode == 130, stderr
    assert "bench: second Ctrl-C: stopped at once" in stderr
    assert elapsed < ENDS_WITHIN_S
    assert "wrote " not in stdout  # the charts, written before that line, were not waited for
    if (out / "run.json").exists():
        assert written(out)["interrupted"] is True
