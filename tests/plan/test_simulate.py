"""The simulator against queueing theory where theory exists, and against hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ttsperf import facts as F
from ttsperf.plan.memory import Workload
from ttsperf.plan.simulate import EngineModel, Load, _run_steps, chunk_plan, simulate
from ttsperf.plan.steptime import StepModel, default_model

KV16 = F.kv_bytes_per_token("fp16")


def constant_engine(
    step_s: float, steps: int, max_batch: int, prefill_s: float | None = None, chunk: int = 24
):
    """Every decode step takes step_s whatever the batch; vocoder free; prefill_s (default step_s)."""
    sm = StepModel("fp16", KV16, t_fixed=step_s, inv_bw=0.0, inv_flops=0.0, vocoder_s_per_audio_s=0.0)
    if prefill_s is not None:
        sm.prefill_points = [(1, prefill_s), (2, prefill_s)]
    w = Workload(audio_seconds=steps / F.STEPS_PER_AUDIO_SECOND, prompt_tokens=1, first_chunk_steps=chunk)
    assert w.steps == steps
    return EngineModel(sm, max_batch, w)


def test_chunk_plan():
    ends, audio = chunk_plan(Workload(audio_seconds=8.0))
    assert ends[0] == 24 and ends[-1] == 375
    assert audio[0] == pytest.approx(20 / 46.875) and audio[1] == pytest.approx(24 / 46.875)
    assert all(b - a == 24 for a, b in zip(ends[:-2], ends[1:-1], strict=True))
    assert sum(audio) == pytest.approx(375 / 46.875)


def test_d_d_1_latency_is_the_service_time():
    """One slot, constant service D, arrivals every 2D: nobody waits, every E2E is exactly D."""
    e = constant_engine(0.01, steps=50, max_batch=1)
    service = 0.01 * (1 + 49)  # prefill (which samples the first step) + 49 decode steps
    r = simulate(e, Load("constant", 1 / (2 * service)), n_requests=200)
    assert r.e2e_p50 == pytest.approx(service, rel=1e-9)
    assert r.e2e_p99 == pytest.approx(service, rel=1e-9)
    assert r.ttfa_p99 == pytest.approx(0.01 * (1 + 23), rel=1e-9)
    assert r.throughput_rps == pytest.approx(1 / (2 * service), rel=0.01)


def test_d_d_1_overload_serves_at_1_over_d():
    e = constant_engine(0.01, steps=50, max_batch=1)
    service = 0.01 * 50
    r = simulate(e, Load("constant", 2 / service), n_requests=400)
    # measured from the first measured arrival to the last completion; the backlog drains at 1/D
    assert r.e2e_p99 > 50 * service
    assert r.mean_batch == 1.0


@pytest.mark.slow
def test_m_d_1_mean_wait_matches_pollaczek_khinchine():
    """Poisson arrivals, one slot, deterministic service: W_q = rho D / (2 (1 - rho)) within 5%."""
    steps, t = 10, 0.01
    service = t * steps  # prefill + steps - 1 decode steps
    e = constant_engine(t, steps=steps, max_batch=1, chunk=steps)
    # Near saturation successive waits are strongly correlated, so the sample is large (~1 s each).
    for rho in (0.5, 0.7):
        r = simulate(e, Load("rate", rho / service), n_requests=100_000, seed=0)
        wq_theory = rho * service / (2 * (1 - rho))
        assert r.mean_s - service == pytest.approx(wq_theory, rel=0.05), rho


def test_continuous_batching_never_queues_below_max_batch():
    """Constant step time, 64 slots, light Poisson load: E2E within one step of the service time."""
    e = constant_engine(0.01, steps=100, max_batch=64, prefill_s=0.0)
    r = simulate(e, Load("rate", 20.0), n_requests=2000, seed=1)
    assert r.mean_batch > 5  # requests overlap...
    # ...but a request only waits for the next step boundary: 99 decode steps (+ at most one)
    assert 0.99 - 1e-9 <= r.e2e_p50 <= 1.00 + 1e-9
    assert r.e2e_p99 <= 1.00 + 1e-9


def test_throughput_saturates_at_max_batch_over_request_time():
    e = constant_engine(0.01, steps=100, max_batch=8, prefill_s=0.0)
    r = simulate(e, Load("streams", 32), n_requests=3000)
    assert r.throughput_rps == pytest.approx(8 / (99 * 0.01), rel=0.02)
    assert r.mean_batch == pytest.approx(8, rel=0.01)
    # 32 streams on 8 slots: each request waits ~3 services in the queue
    assert r.e2e_p50 == pytest.approx(4 * 0.99, rel=0.05)


def test_saturated_throughput_is_unbiased_with_many_streams_in_flight():
    """More streams in flight than measured requests: the count over the span must not undercount."""
    e = constant_engine(0.01, steps=100, max_batch=400, prefill_s=0.0)
    r = simulate(e, Load("streams", 400), n_requests=100)
    assert r.throughput_rps == pytest.approx(400 / (100 * 0.01), rel=0.03)


def test_single_stream_latency_by_hand_with_growing_context():
    """One stream on the roofline model: E2E = prefill + sum of t(1, P + j) + vocoder calls, by hand."""
    sm = default_model("fp16", KV16, 300.0, 8.0)
    w = Workload(audio_seconds=2.0, prompt_tokens=40, first_chunk_steps=24)
    e = EngineModel(sm, 4, w)
    steps = w.steps
    decode = sum(float(sm.step(1, 40 + j)) for j in range(steps - 1))  # the prefill made step 1
    ends, audio = chunk_plan(w)
    voc = sum(sm.vocoder(a) for a in audio)
    r = simulate(e, Load("streams", 1), n_requests=20)
    assert r.e2e_p50 == pytest.approx(sm.prefill(40) + decode + voc, rel=1e-9)
    ttfa = sm.prefill(40) + sum(float(sm.step(1, 40 + j)) for j in range(23)) + sm.vocoder(audio[0])
    assert r.ttfa_p50 == pytest.approx(ttfa, rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_run_steps_closed_form_matches_the_loop(seed):
    rng = np.random.default_rng(seed)
    c = tuple(float(x) for x in rng.uniform(0, 1e-3, 5))
    batch, ctx0, k = int(rng.integers(1, 50)), int(rng.integers(0, 5000)), int(rng.integers(1, 400))
    times = [
        c[0] + max(c[1] + c[2] * (ctx0 + batch * j + batch), c[3] * batch + c[4] * (ctx0 + batch * j))
        for j in range(k)
    ]
    cum = np.cumsum(times)
    t_stop = float(rng.uniform(-0.1 * cum[-1], cum[-1] * 1.2))  # <= 0: an arrival already waiting
    n_expect = k if t_stop > cum[-1] else int(np.searchsorted(cum, t_stop)) + 1
    elapsed, n = _run_steps(c, batch, ctx0, k, t_stop)
    assert n == n_expect
    assert elapsed == pytest.approx(cum[n - 1], rel=1e-9)


def test_underrun_when_steps_are_slower_than_real_time():
    slow = constant_engine(0.030, steps=240, max_batch=1)
    r = simulate(slow, Load("streams", 1), n_requests=20)
    # each 24-step chunk takes 0.72 s to make; the first plays only 24 - 4 held-back steps (0.427 s),
    # so the worst stall is after it: 0.72 - 0.427 s (later ones: 0.72 - 0.512 s)
    assert r.underrun_p99 == pytest.approx(24 * 0.030 - 20 / F.STEPS_PER_AUDIO_SECOND, rel=1e-6)
    slow.workload.lookahead_steps = 0
    r0 = simulate(slow, Load("streams", 1), n_requests=20)
    assert r0.underrun_p99 == pytest.approx(24 * 0.030 - 24 / F.STEPS_PER_AUDIO_SECOND, rel=1e-6)
    fast = constant_engine(0.010, steps=240, max_batch=1)
    assert simulate(fast, Load("streams", 1), n_requests=20).underrun_p99 == 0.0


def test_deterministic_per_seed():
    e = EngineModel(default_model("fp16", KV16, 1008, 165.2), 64, Workload())
    a = simulate(e, Load("rate", 3.0), n_requests=300, seed=7)
    b = simulate(e, Load("rate", 3.0), n_requests=300, seed=7)
    c = simulate(e, Load("rate", 3.0), n_requests=300, seed=8)
    assert a == b
    assert a.e2e_p99 != c.e2e_p99


def test_p99_resolution_flag_and_bad_loads():
    e = constant_engine(0.01, steps=10, max_batch=2)
    assert not simulate(e, Load("streams", 1), n_requests=100).p99_resolved
    assert simulate(e, Load("streams", 1), n_requests=1000).p99_resolved
    with pytest.raises(ValueError):
        simulate(e, Load("rate", 0.0))
    assert math.isfinite(simulate(e, Load("streams", 3), n_requests=50).e2e_p99)


def test_attended_tokens_padded_to_the_longest_row():
    from ttsperf.plan.simulate import attended_tokens

    # rows started at steps 0, 10, 30; prompt 5; now at step 40: the oldest holds 45 tokens
    assert attended_tokens(3, 5, 40, 0) == 3 * 45


def test_one_vocoder_call_per_step_for_every_row_that_emits():
    sm = StepModel("fp16", KV16, t_fixed=0.01, inv_bw=0.0, inv_flops=0.0)  # vocoder call = t_fixed
    w = Workload(audio_seconds=48 / F.STEPS_PER_AUDIO_SECOND, prompt_tokens=1)
    one = simulate(EngineModel(sm, 8, w), Load("streams", 1), n_requests=20)
    # alone: prefill + 47 decode steps + 2 calls (chunk at 24, final at 48), 10 ms each
    assert one.e2e_p50 == pytest.approx(0.01 * (1 + 47 + 2), rel=1e-9)
    # 8 rows sent together share the prefill and each chunk's call: as long as one alone
    eight = simulate(EngineModel(sm, 8, w), Load("streams", 8), n_requests=8, cold_start=True)
    assert eight.e2e_p99 == pytest.approx(one.e2e_p50, rel=1e-9)


def test_cold_start_closed_loop_runs_in_waves_by_hand():
    """8 streams sent at once into 4 empty slots, equal lengths, service S: the first 4 take S and
    the next 4 2 S (what bench measures when its measured requests are just the first burst);
    after the first wave every request waits one whole wave, as in the steady state."""
    e = constant_engine(0.01, steps=100, max_batch=4, prefill_s=0.0)
    service = 99 * 0.01
    burst = simulate(e, Load("streams", 8), n_requests=8, cold_start=True)
    assert burst.e2e_p50 == pytest.approx(1.5 * service, rel=1e-9)  # between the waves: [S] x 4 + [2 S] x 4
    assert burst.e2e_p99 == pytest.approx(2 * service, rel=1e-9)
    assert burst.throughput_rps == pytest.approx(4 / service, rel=1e-9)  # 8 done in 2 S
    longer = simulate(e, Load("streams", 8), n_requests=16, cold_start=True)
    assert longer.e2e_p50 == pytest.approx(2 * service, rel=1e-9)  # 4 x S, then 12 x 2 S
    steady = simulate(e, Load("streams", 8), n_requests=400)
    assert steady.e2e_p50 == pytest.approx(2 * service, rel=1e-9)


def test_host_cost_per_row_adds_to_every_decode_step():
    """B rows in lockstep, constant step t, host cost h per row: each decode step takes t + B h."""
    t, h, steps = 0.01, 1e-4, 100
    e = constant_engine(t, steps=steps, max_batch=8, prefill_s=0.0)
    e.host_per_row_s = h
    r = simulate(e, Load("streams", 8), n_requests=2000)
    assert r.throughput_rps == pytest.approx(8 / ((steps - 1) * (t + 8 * h)), rel=0.02)
    alone = simulate(e, Load("streams", 1), n_requests=20)
    assert alone.e2e_p50 == pytest.approx((steps - 1) * (t + h), rel=1e-9)


def test_the_engine_as_built_pays_the_step_models_host_costs():
    sm = StepModel("fp16", KV16, t_fixed=0.01, inv_bw=0.0, inv_flops=0.0, t_row=3e-6, t_host=2e-4)
    built = EngineModel.of(sm, 8, Workload(audio_seconds=2.0))
    assert (built.host_per_row_s, built.host_per_step_s) == (3e-6, 2e-4)
    assert (built.handoff_s, built.handoff_serial, built.intake_s) == (sm.t_chunk, False, sm.t_request)
    assert EngineModel(sm, 8, Workload()).handoff_s == 0.0  # the bare model: no host cost unless set


def test_host_cost_per_step_adds_once_whatever_the_batch():
    t, c, steps = 0.01, 2e-3, 100
    e = constant_engine(t, steps=steps, max_batch=8, prefill_s=0.0)
    e.host_per_step_s = c
    alone = simulate(e, Load("streams", 1), n_requests=20)
    assert alone.e2e_p50 == pytest.approx((steps - 1) * (t + c), rel=1e-9)
    full = simulate(e, Load("streams", 8), n_requests=16, cold_start=True)
    assert full.e2e_p50 == pytest.approx((steps - 1) * (t + c), rel=1e-9)  # the same for 8 rows


def test_chunks_emitted_together_leave_one_hand_off_apart():
    """8 rows sent at once, equal lengths: one audio call per chunk boundary, then the event loop
    hands the 8 chunks out h apart. Beside the engine (a GPU's host) only the chunks wait; on the
    engine's CPU (handoff_serial) the loop has half the CPU, so they leave 2 h apart, and the
    engine's next steps take the other half: the run is longer by the hand-offs."""
    t, h, steps = 0.01, 1e-3, 48  # chunks at 24 and 48 steps
    e = constant_engine(t, steps=steps, max_batch=8, prefill_s=0.0)
    e.handoff_s = h
    beside = simulate(e, Load("streams", 8), n_requests=8, cold_start=True)
    first = 23 * t  # the prefill samples step one
    assert beside.ttfa_p50 == pytest.approx(first + 4.5 * h, rel=1e-9)  # 1 h .. 8 h: median 4.5 h
    assert beside.ttfa_p99 == pytest.approx(first + 7.93 * h, rel=1e-9)  # numpy's linear p99
    assert beside.e2e_p99 == pytest.approx((steps - 1) * t + 7.93 * h, rel=1e-9)  # steps never waited
    e.handoff_serial = True
    shared = simulate(e, Load("streams", 8), n_requests=8, cold_start=True)
    assert shared.ttfa_p50 == pytest.approx(first + 9 * h, rel=1e-9)  # 2 h .. 16 h
    # the 8 first chunks' hand-offs (8 h) stretch the next steps by as much
    assert shared.e2e_p50 == pytest.approx((steps - 1) * t + 8 * h + 9 * h, rel=1e-9)


def test_requests_sent_together_are_taken_in_one_intake_apart():
    """The event loop takes each request in (HTTP, validation, the tokenizer) before the engine can
    queue it, one after another: two requests sent at t = 0 with an intake i of 5 steps are queued
    at i and 2i; the first joins an idle engine at i, the second 5 steps later."""
    t, i = 0.01, 0.05
    e = constant_engine(t, steps=48, max_batch=2, prefill_s=0.0)
    e.intake_s = i
    r = simulate(e, Load("streams", 2), n_requests=2, cold_start=True)
    first = 23 * t  # the prefill samples step one
    assert r.ttfa_p50 == pytest.approx((i + first + 2 * i + first) / 2, rel=1e-9)
    assert r.ttfa_p99 == pytest.approx(i + first + 0.99 * i, rel=1e-9)  # numpy's linear p99


def test_a_request_taken_in_on_the_engines_cpu_stretches_the_steps_it_runs_beside():
    """One stream: each request waits its intake i, and an idle engine loses nothing to it, on
    its CPU or not. Four streams on the engine's CPU (serial): a request is taken in while the
    others' rows decode, and those steps share the CPU with it: every reply takes longer."""
    t, i, steps = 0.01, 2e-3, 48
    e = constant_engine(t, steps=steps, max_batch=4, prefill_s=0.0)
    e.intake_s = i
    beside = simulate(e, Load("streams", 1), n_requests=20)
    assert beside.ttfa_p50 == pytest.approx(i + 23 * t, rel=1e-9)
    assert beside.e2e_p50 == pytest.approx(i + (steps - 1) * t, rel=1e-9)
    busy_beside = simulate(e, Load("streams", 4), n_requests=200)
    e.handoff_serial = True
    assert simulate(e, Load("streams", 1), n_requests=20).e2e_p50 == pytest.approx(beside.e2e_p50, rel=1e-9)
    busy_serial = simulate(e, Load("streams", 4), n_requests=200)
    assert busy_serial.mean_step_s > busy_beside.mean_step_s
    assert busy_serial.throughput_rps < busy_beside.throughput_rps


def test_a_listener_asks_again_only_when_the_reply_has_played_and_it_has_thought():
    """One listener, a 2 s reply decoded in well under its length: each cycle is TTFA + the audio
    (the player starts at the first chunk and never stalls) + the think time, and Little's law
    counts the whole cycle."""
    steps = round(2 * F.STEPS_PER_AUDIO_SECOND)
    e = constant_engine(0.001, steps=steps, max_batch=4)
    audio = steps / F.STEPS_PER_AUDIO_SECOND
    for think in (0.0, 0.5):
        r = simulate(e, Load("streams", 1, think), n_requests=50)
        assert r.underrun_p99 == 0.0
        cycle = r.ttfa_p50 + audio + think
        assert r.throughput_rps == pytest.approx(1 / cycle, rel=1e-6)
    back_to_back = simulate(e, Load("streams", 1), n_requests=50)
    assert back_to_back.throughput_rps == pytest.approx(1 / back_to_back.e2e_p50, rel=1e-6)


def test_a_card_three_times_faster_carries_more_listeners_though_each_join_stalls_every_row():
    """A listener asks at the pace it hears, whatever the card: a faster card, whose eager
    prefills (one per join) stall every running row as long as a slow card's do, still carries
    more listeners (docs/PLANNING.md, "Streams are listeners")."""
    from ttsperf.plan.capacity import find_capacity

    slo = {"ttfa_p99": 0.3, "underrun_p99": 0.1}

    def engine(bw_scale: float) -> EngineModel:
        sm = default_model("fp16", KV16, 1000.0 * bw_scale, 300.0 * bw_scale)
        sm.t_fixed, sm.prefill_host = 0.001, [(1, 0.010), (64, 0.05)]
        return EngineModel.of(sm, 256, Workload())

    def cap(e: EngineModel, think: float) -> float:
        sim = lambda load: simulate(e, Load(load.kind, load.value, think), n_requests=400)  # noqa: E731
        return find_capacity(256, "streams", slo, sim, None, 0.03).value

    slow, fast = engine(1.0), engine(3.0)
    assert cap(fast, 0.0) > cap(slow, 0.0)


def test_a_ramp_up_starts_a_cold_starts_streams_one_gap_apart_and_frays_the_wave():
    """bench --ramp-up R with N streams: stream k sends its first request at k R / N. Ramped over
    one reply, each first chunk waits for no other's hand-off and the intake of a wave does not
    pile up in front of the first audio."""
    t, h, i = 0.01, 2e-3, 2e-3
    e = constant_engine(t, steps=48, max_batch=8, prefill_s=0.0)
    e.handoff_s, e.intake_s = h, i
    at_once = simulate(e, Load("streams", 8), n_requests=8, cold_start=True)
    ramp = 47 * t  # one reply
    ramped_load = Load("streams", 8, ramp_s=ramp)
    assert ramped_load.label() == "8 streams (ramp 0.47 s)"
    ramped = simulate(e, ramped_load, n_requests=8, cold_start=True)
    assert ramped.ttfa_p99 < at_once.ttfa_p50  # no request waits for the wave
    assert ramped.ttfa_p99 == pytest.approx(i + 23 * t + h, rel=0.3)  # about alone: intake, steps, hand-off
    from ttsperf.plan.simulate import Arrivals

    arrivals = Arrivals(ramped_load, np.random.default_rng(0))
    arrivals.start(8, cold_start=True, service_s=0.0)
    assert [q.arrival for q in arrivals.requests] == pytest.approx([k * ramp / 8 for k in range(8)])


def test_one_stream_of_two_lengths_takes_each_lengths_own_time():
    """Requests of 48 and 96 steps, equally likely, one at a time on a constant step t: each E2E
    is its own length's 47 t or 95 t, both come up about half the time, and P99 is the long one's
    (one length would make P50 = P99)."""
    t = 0.01
    e = constant_engine(t, steps=48, max_batch=4, prefill_s=0.0)
    a48, a96 = 48 / F.STEPS_PER_AUDIO_SECOND, 96 / F.STEPS_PER_AUDIO_SECOND
    e.workload = Workload.mixed([(a48, 1), (a96, 1)], first_chunk_steps=24)
    assert e.workload.audio_seconds == pytest.approx(72 / F.STEPS_PER_AUDIO_SECOND)
    assert e.workload.context_tokens == 1 + 96  # a slot holds the longest
    from ttsperf.plan.simulate import _one_run

    requests, measured, _ = _one_run(e, Load("streams", 1), 400, 0, cold_start=False)
    e2e = [requests[i].done - requests[i].arrival for i in measured]
    assert all(x == pytest.approx(47 * t) or x == pytest.approx(95 * t) for x in e2e)
    short = sum(x == pytest.approx(47 * t) for x in e2e) / len(e2e)
    assert 0.4 < short < 0.6
    r = simulate(e, Load("streams", 1), n_requests=400)
    assert r.e2e_p50 < r.e2e_p99 == pytest.approx(95 * t)
    assert r.rtf_p99 == pytest.approx(95 * t / a96, rel=0.03)  # each E2E over its own audio


def test_one_length_given_twice_is_that_length():
    w = Workload.mixed([(4.0, 30), (4.0, 30)])
    assert w.lengths == () and (w.audio_seconds, w.prompt_tokens) == (4.0, 30)
    with pytest.raises(ValueError, match="at least one length"):
        Workload.mixed([])


def test_a_short_row_leaves_before_a_long_one_that_started_earlier():
    """The batch is padded to its oldest running row: a short row that finishes first leaves the
    long one the oldest; once the long one leaves too, the rows behind it are the oldest."""
    from ttsperf.plan.simulate import _Rows

    rows = _Rows([([24, 96], [0.2, 0.8]), ([24, 48], [0.2, 0.3])])  # class 0 long, class 1 short
    rows.admit([0], [0])  # the long row at step 0
    rows.g = 10
    rows.admit([1, 2], [1, 1])  # two short rows at step 10
    rows.g = 20
    rows.admit([3], [1])  # one more short row at step 20
    assert (rows.running, rows.starts[0]) == (4, 0)
    rows.leave(10)
    rows.leave(10)  # both short rows of step 10 finish while the long one runs
    assert (rows.running, rows.starts[0]) == (2, 0)
    rows.leave(0)  # the long row: the oldest left is the one of step 20
    assert (rows.running, list(rows.starts)) == (1, [20])
    rows.leave(20)
    assert (rows.running, list(rows.starts)) == (0, [])
    # events: each class at its own chunk boundaries (a row's step n of audio at decode step n - 1)
    [(ids, chunk)] = rows.events[10 + 47]  # the short class's second and last chunk
    assert (ids, chunk.audio, chunk.first, chunk.last) == ([1, 2], 0.3, False, True)


def test_every_card_draws_the_same_lengths_for_the_same_requests():
    """Common random numbers: request i's length depends on the seed only, not on when it arrives
    or on the arrivals' own draws."""
    from ttsperf.plan.simulate import Arrivals

    def lengths(rng_seed: int, times: list[float]) -> list[int]:
        a = Arrivals(Load("rate", 5.0), np.random.default_rng(rng_seed), lengths=3, seed=7)
        for t in times:
            a.add(t, -1)
        return [q.length for q in a.requests]

    first = lengths(0, [0.1 * i for i in range(50)])
    assert first == lengths(1, [0.3 * i for i in range(50)]) and set(first) == {0, 1, 2}
    other_seed = Arrivals(Load("rate", 5.0), np.random.default_rng(0), lengths=3, seed=8)
    for i in range(50):
        other_seed.add(0.1 * i, -1)
    assert [q.length for q in other_seed.requests] != first


def test_lengths_in_order_go_round_as_bench_sends_its_texts():
    """ordered: the k-th request takes length k mod n (bench's texts in order; --like a run's
    own order), whatever the seed."""
    from ttsperf.plan.simulate import Arrivals

    a = Arrivals(Load("rate", 5.0), np.random.default_rng(3), lengths=3, seed=9, ordered=True)
    for i in range(7):
        a.add(0.1 * i, -1)
    assert [q.length for q in a.requests] == [0, 1, 2, 0, 1, 2, 0]
