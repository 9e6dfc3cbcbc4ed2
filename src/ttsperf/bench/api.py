"""`run_bench(BenchSettings)` -> BenchRun: the library function behind `ttsperf bench`.

Order of work: validate everything (bad input fails before a single request goes out), read the
server's settings (ttsperf serve's /healthz; nothing from another server), start telemetry, run
each load point (or the find-max search), summarise each point on its own window.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass

from ttsperf import __version__
from ttsperf.bench.adapters import AdapterOptions, make_adapter
from ttsperf.bench.interrupt import CtrlC
from ttsperf.bench.metrics import summarize, window
from ttsperf.bench.results import BenchRun, PointResult, RequestRecord, Strategy, Verdict
from ttsperf.bench.runner import Runner
from ttsperf.bench.search import search_steps
from ttsperf.bench.server_info import read_server
from ttsperf.bench.settings import DEFAULT_REQUESTS, BenchSettings
from ttsperf.bench.slo import evaluate, meets_request_bounds, parse_slo, requests_to_decide
from ttsperf.bench.telemetry import Telemetry, aggregate
from ttsperf.bench.texts import load_workload

ProgressHook = Callable[[str, int, RequestRecord | None], None]  # (label, total, record or None at start)


def run_bench(
    cfg: BenchSettings, progress: ProgressHook | None = None, ctrl_c: CtrlC | None = None
) -> BenchRun:
    """Ctrl-C at any moment ends the run with what was measured (`interrupted`, the finished
    requests); `ctrl_c`: the caller's, to share one count of presses (the CLI's second one exits)."""
    cfg.validate()
    adapter = make_adapter(cfg.adapter, AdapterOptions(
        response_format=cfg.format, stream=cfg.stream, voice=cfg.voice, model=cfg.model,
        pcm_rate=cfg.pcm_rate, template_body=cfg.template_body, template_kind=cfg.template_kind))  # fmt: skip
    workload = load_workload(cfg.texts, cfg.text_set)
    if cfg.requests is None and cfg.duration is None:
        cfg.requests = DEFAULT_REQUESTS
    run = BenchRun(
        tool_version=__version__,
        created_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        targets=list(cfg.urls), adapter=cfg.adapter, config=_public(cfg.model_dump()),
        workload=workload.describe(),
    )  # fmt: skip
    b = _Bench(cfg, run, parse_slo(cfg.slo), progress)
    ctrl_c = ctrl_c or CtrlC()
    interrupted = False
    with ctrl_c:
        try:
            # what the server runs, asked once before the load and its clock (the first target's;
            # replicas run alike): best effort, a few seconds at most, never a failed run
            run.server, run.server_note = read_server(cfg.urls[0], cfg.header_dict())
            epoch = time.perf_counter()
            b.tele = Telemetry(epoch, cfg.telemetry_interval, cfg.server_pid, cfg.metrics_url, gpu=cfg.gpu)
            b.runner = Runner(
                adapter, cfg.urls, workload, cfg.timeout, cfg.audio_check, epoch=epoch,
                headers=cfg.header_dict(), on_done=(lambda r: progress(b.label, 0, r)) if progress else None,
            )  # fmt: skip
            b.tele.start()
            asyncio.run(b.main(ctrl_c))
        except KeyboardInterrupt:  # before the load (the handler raises there), or a second Ctrl-C
            interrupted = True
        finally:
            if b.tele is not None:
                b.tele.stop(wait=not (interrupted or ctrl_c.pressed))
    if interrupted or ctrl_c.pressed:
        b.interrupted()
    if b.runner is not None:
        run.records = [r for r in b.runner.records if r.done]
    if b.tele is not None:  # copies: a thread not waited for (after Ctrl-C) may still append
        run.telemetry, run.telemetry_notes = list(b.tele.samples), list(b.tele.notes)
    if b.bounds:
        run.slo = overall_verdict(run)
    return run


@dataclass
class _Bench:
    """One bench run in progress: its settings, results so far, SLO bounds, telemetry and runner."""

    cfg: BenchSettings
    run: BenchRun
    bounds: dict
    progress: ProgressHook | None
    tele: Telemetry | None = None  # both None until the load is set up (a Ctrl-C can come first)
    runner: Runner | None = None
    label: str = ""  # the load point now running (the progress line names it)

    async def main(self, ctrl_c: CtrlC) -> None:
        # A Ctrl-C during the load cancels this task from inside the loop: every request in flight
        # stops at once, whatever it waits for (a server that never answers, a ramp's sleep).
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        ctrl_c.stop_with(lambda: loop.call_soon_threadsafe(task.cancel))
        try:
            async with self.runner:
                if self.cfg.find_max:
                    await search(self.cfg, self.one_point, self.run)
                else:
                    for i, s in enumerate(self.cfg.strategies()):
                        await self.one_point(i, s)
        except asyncio.CancelledError:
            if not ctrl_c.pressed:
                raise
        finally:
            ctrl_c.hold()  # the loop is closing: a Ctrl-C now is counted, run_bench ends as interrupted

    def finish_point(self, strategy: Strategy, recs: list[RequestRecord]) -> PointResult:
        cfg = self.cfg
        recs = [r for r in recs if r.done]  # a run cut short by Ctrl-C drops requests not fully judged
        measured = [r for r in recs if not r.warmup]
        t0 = min((r.t_send for r in measured if r.t_send is not None), default=0.0)
        t1 = t0 + window(measured)
        audio = sum(r.audio_s or 0.0 for r in measured if r.ok)
        point = summarize(
            strategy, recs, meets_request_bounds(self.bounds), aggregate(self.tele.samples, t0, t1, audio),
            cfg.confidence,
        )  # fmt: skip
        if self.bounds:
            point.slo = evaluate(self.bounds, point, recs, cfg.confidence)
        self.run.points.append(point)
        return point

    async def one_point(self, i: int, s: Strategy) -> PointResult:
        cfg = self.cfg
        self.label = s.label
        total = (cfg.requests + cfg.warmup) if cfg.requests is not None else 0
        if self.progress:
            self.progress(s.label, total, None)
        recs = await self.runner.run_point(i, s, cfg.requests, cfg.duration, cfg.warmup, cfg.seed + i)
        point = self.finish_point(s, recs)
        return await self.until_decided(i, s, recs, point) if cfg.until_decided and point.slo else point

    async def until_decided(
        self, i: int, s: Strategy, recs: list[RequestRecord], point: PointResult
    ) -> PointResult:
        """More requests at the same load while the SLO is inconclusive for want of them."""
        cfg, asked = self.cfg, point.requests
        while more := requests_to_decide(point.slo, point.requests, cfg.max_requests):
            if self.progress:
                self.progress(f"{s.label} +{more} to decide the SLO", more, None)
            self.run.points.pop()  # the point is judged again on all its requests
            extra = await self.runner.run_point(
                i, s, more, None, 0, cfg.seed + i + len(recs), first=len(recs)
            )
            recs = recs + extra
            point = self.finish_point(s, recs)
        point.added_requests = point.requests - asked
        if point.slo.status == "inconclusive" and point.requests >= cfg.max_requests:
            point.slo.undecided = [
                f"{u} (stopped at --max-requests {cfg.max_requests})" for u in point.slo.undecided
            ]
        return point

    def interrupted(self) -> None:
        """Ctrl-C: keep every point that had finished requests (bench reports what it measured)."""
        self.run.interrupted = True
        if self.runner is None:  # stopped before the load: nothing measured
            return
        done = {p.label for p in self.run.points}
        for i, s in enumerate(self.cfg.strategies()):
            recs = [r for r in self.runner.records if r.point == i and r.done]  # not those in flight
            if recs and s.label not in done and not self.cfg.find_max:
                self.finish_point(s, recs)


async def search(cfg: BenchSettings, one_point, run: BenchRun) -> None:
    """Drive the doubling/bisection search, one real load point per probe."""
    closed = not cfg.rate
    values = cfg.in_flight() if closed else cfg.rate
    start = float(min(values)) if values else 1.0
    limit = float(max(values)) if len(values) > 1 else (1024.0 if closed else 10_000.0)
    steps = search_steps(start, closed, limit)
    verdicts: dict[float, Verdict | None] = {}
    try:
        x = next(steps)
        while True:
            s = cfg.strategy(x)
            point = await one_point(len(run.points), s)
            verdicts[x] = point.slo
            x = steps.send(bool(point.slo and point.slo.passed))
    except StopIteration as stop:
        result = stop.value
    probes = [{"load": x, "passed": ok, **_why(verdicts[x])} for x, ok in result.probes]
    run.find_max = {
        "dimension": "concurrency" if closed else "rate",
        "max_passing": result.best,
        "first_failing": result.first_fail,
        # why the load above the answer was not taken: failed, or still undecided (and why)
        "above": next((p for p in probes if p["load"] == result.first_fail), None),
        "probes": probes,
    }


def _why(v: Verdict | None) -> dict:
    status = v.status if v else "fail"
    lines = (v.failures or v.undecided) if v else ["no verdict"]
    return {"status": status, "why": lines[0] if lines else ""}


def _public(config: dict) -> dict:
    """The config as written into results: header values (tokens) are not kept, only their names."""
    config["header"] = [h.partition(":")[0] + ": <redacted>" for h in config.get("header", [])]
    return config


def dead_points(run: BenchRun) -> list[str]:
    """One line per load point where requests were sent and none succeeded: a dead or refusing
    server, which a CI job must not read as a pass (the SLO, if any, judges the rest)."""
    lines = []
    for p in run.points:
        if p.requests and not p.successes:
            why = "; ".join(f"{cls}: {text}" for cls, text in list(p.error_examples.items())[:2])
            lines.append(f"{p.label}: all {p.requests} requests failed" + (f" ({why})" if why else ""))
    return lines


def overall_verdict(run: BenchRun) -> Verdict:
    """fail if any point fails; else inconclusive if any point is; pass when every point passes.
    find-max passes when some probed load passed (an inconclusive probe counts as not passing);
    when none did, it fails or is inconclusive as its lowest probe was."""
    if run.find_max is not None:
        if run.find_max["max_passing"] is not None:
            return Verdict(status="pass")
        above = run.find_max["above"] or {"status": "fail", "why": ""}
        line = (
            f"no probed load met the SLO; at {above['load']:g}: {above['why']}" if above.get("load") else ""
        )
        if above["status"] == "inconclusive":  # the lowest load probed could not be decided
            return Verdict(status="inconclusive", undecided=[line])
        return Verdict(status="fail", failures=[line or "no probed load met the SLO"])
    failures = [f"{p.label}: {f}" for p in run.points if p.slo for f in p.slo.failures]
    undecided = [f"{p.label}: {u}" for p in run.points if p.slo for u in p.slo.undecided]
    if failures or not run.points:
        status = "fail"
    else:
        status = "inconclusive" if undecided else "pass"
    return Verdict(status=status, failures=failures, undecided=undecided)


EXIT_PASS, EXIT_FAIL, EXIT_INCONCLUSIVE = 0, 1, 3  # 2 is bad input, 130 Ctrl-C


def exit_code(run: BenchRun) -> int:
    """What `ttsperf bench` exits with: a dead point or a failed SLO is 1, an inconclusive SLO 3."""
    if dead_points(run) or (run.slo is not None and run.slo.status == "fail"):
        return EXIT_FAIL
    if run.slo is not None and run.slo.status == "inconclusive":
        return EXIT_INCONCLUSIVE
    return EXIT_PASS
