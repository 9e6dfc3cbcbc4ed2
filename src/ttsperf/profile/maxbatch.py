"""`ttsperf profile --max-batch-search`: the largest batch that fits on this device, per context.

Each probe is what the engine holds and runs at batch B: its KV slots for B rows of the context
plus one engine decode step over them (profile/measure.py's decode_step).

- CUDA: try it. A probe that runs out of memory is caught, everything it allocated is freed and
  the search shrinks (double from 1, then bisect: profile/search.py), so the answer is the
  largest batch that really ran, with the allocator's peak at it. An optional budget also
  rejects a probe whose peak exceeds it.
- CPU: nothing fails gracefully (the OS swaps, then kills), so fitting is a memory budget
  (default: what is available now minus headroom). The process's peak RSS over a probe is
  measured at batch 1 and 8; fixed + per-row bytes follow, per row never below the KV slots' own
  bytes. The largest batch within the budget is then run for real and its measured peak
  checked; if it exceeds the budget, real runs bisect between the largest batch measured within
  the budget and that one, to within 5%.

Example: ttsperf profile --synthetic --config tiny --quick --max-batch-search --memory-budget 2
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import psutil
import torch

from ttsperf.engine.oom import is_oom
from ttsperf.model.forward import SlotForward
from ttsperf.model.pipeline import Pipeline
from ttsperf.profile.measure import decode_step
from ttsperf.profile.schema import MaxBatchPoint, Measured
from ttsperf.profile.search import largest_fitting

DEFAULT_CAP = 4096  # above what any engine runs (its auto max batch caps at 64)
CPU_PROBE = 8  # the second batch the per-row RSS slope is measured at
GIB = 1024**3

Probe = Callable[[int], int]  # batch -> peak bytes of one probe (may raise an out-of-memory)


def default_budget() -> tuple[float, str]:
    """CPU: this process may grow to what is available now, less max(1 GiB, 10% of RAM)."""
    vm = psutil.virtual_memory()
    headroom = max(GIB, 0.1 * vm.total)
    rss = psutil.Process().memory_info().rss
    budget = rss + vm.available - headroom
    how = (
        f"default: this process's RSS {rss / GIB:.2f} GiB + available {vm.available / GIB:.2f} GiB "
        f"- headroom {headroom / GIB:.2f} GiB (the larger of 1 GiB and 10% of RAM)"
    )
    return budget, how


def oom_bisection(
    probe: Probe, cap: int, free: Callable[[], None], budget: float | None = None
) -> tuple[int, str, int | None, list[tuple[int, bool]]]:
    """Largest batch whose probe runs without an out-of-memory (and within `budget`).

    Returns (batch, limit, peak bytes at batch, probes). An out-of-memory is caught, `free()`
    runs after the exception is gone (its traceback holds the probe's tensors), and the search
    goes on below; any other error propagates.
    """
    probes: list[tuple[int, bool]] = []
    peaks: dict[int, int] = {}
    reasons: set[str] = set()

    def fits(b: int) -> bool:
        oom = False
        try:
            peak = probe(b)
        except Exception as exc:
            if not is_oom(exc):
                raise
            oom = True
        if oom:
            free()
            reasons.add("oom")
            probes.append((b, False))
            return False
        ok = budget is None or peak <= budget
        if not ok:
            reasons.add("budget")
        peaks[b] = peak
        probes.append((b, ok))
        return ok

    batch, capped = largest_fitting(fits, cap)
    limit = "cap" if capped else ("oom" if "oom" in reasons else "budget")
    return batch, limit, peaks.get(batch), probes


def budget_search(
    probe: Probe, budget: float, cap: int, row_floor: float
) -> tuple[int, str, int | None, list[tuple[int, bool]], str]:
    """Largest batch whose measured peak stays within `budget`, from a line through two probes.

    Returns (batch, limit, peak bytes at batch, probes, how the line was measured).
    """
    probes: list[tuple[int, bool]] = []

    def measure(b: int) -> int:
        peak = probe(b)
        probes.append((b, peak <= budget))
        return peak

    first = measure(1)
    if first > budget:
        return 0, "budget", None, probes, f"peak RSS at batch 1 {first / 1e6:,.0f} MB is over the budget"
    b2 = min(CPU_PROBE, cap)
    per_row, peaks = float(row_floor), {1: first}
    if b2 > 1:
        peaks[b2] = measure(b2)
        per_row = max(per_row, (peaks[b2] - first) / (b2 - 1))
    fixed = first - per_row
    how = (
        f"peak RSS over one decode step measured at batch 1 and {b2}: {fixed / 1e6:,.0f} MB fixed + "
        f"{per_row / 1e6:,.3f} MB per row (never below the KV slots' {row_floor / 1e6:,.3f} MB)"
    )
    batch, capped = largest_fitting(lambda b: fixed + per_row * b <= budget, cap)
    if batch <= 1:
        return batch, "budget", first if batch == 1 else None, probes, how
    peaks[batch] = measure(batch)  # run the line's answer for real
    if peaks[batch] <= budget:
        return batch, "cap" if capped else "budget", peaks[batch], probes, how
    # Over: the line missed per-row costs that grow with the batch. Bisect between the largest
    # batch measured within the budget and this one, on real runs, to within 5%.
    lo, hi = max(b for b, pk in peaks.items() if pk <= budget), batch
    while hi - lo > max(1, lo // 20):
        mid = (lo + hi) // 2
        peaks[mid] = measure(mid)
        lo, hi = (mid, hi) if peaks[mid] <= budget else (lo, mid)
    how += f"; batch {batch} ran over the budget, so bisected on real runs to within 5%"
    return lo, "budget", peaks[lo], probes, how


def _peak_rss_reset() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) so the next read covers only what follows."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # not Linux: VmHWM below falls back to the RSS after the probe


def _peak_rss() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return psutil.Process().memory_info().rss


@torch.inference_mode()
def search_max_batch(
    pipe: Pipeline,
    contexts: list[int],
    *,
    budget_bytes: float | None = None,
    cap: int = DEFAULT_CAP,
    progress: Callable[[str], None] | None = None,
) -> list[MaxBatchPoint]:
    """One MaxBatchPoint per context: the largest batch the engine's step runs at on this device."""
    say = progress or (lambda _msg: None)
    device = pipe.device
    fwd = SlotForward(pipe.model.gpt)
    gen = torch.Generator().manual_seed(0)
    cuda = device.type == "cuda"
    budget_how = "" if budget_bytes is None else f"--memory-budget {budget_bytes / GIB:g} GiB"
    if not cuda and budget_bytes is None:
        budget_bytes, budget_how = default_budget()

    def free() -> None:
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()

    points = []
    for ctx in contexts:

        def probe(b: int) -> int:
            free()
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            else:
                _peak_rss_reset()
            say(f"max batch at context {ctx}: trying batch {b}")  # noqa: B023
            slots, step = decode_step(pipe, fwd, b, ctx, gen)  # noqa: B023
            step()
            if cuda:
                torch.cuda.synchronize(device)
                return torch.cuda.max_memory_allocated(device)
            del slots, step
            return _peak_rss()

        if cuda:
            batch, limit, peak, probes = oom_bisection(probe, cap, free, budget_bytes)
            method = "OOM-safe bisection: a probe that runs out of memory is freed and the batch shrinks"
            if budget_bytes is not None:
                method += f"; a probe's allocator peak must also stay within {budget_how}"
            peak_how = "torch.cuda.max_memory_allocated over one engine decode step at max_batch"
        else:
            elem = next(pipe.model.gpt.parameters()).element_size()
            row = pipe.cfg.gpt.kv_bytes_per_token(elem) * (ctx + 1)  # one row's KV, not allocated
            batch, limit, peak, probes, line = budget_search(probe, budget_bytes, cap, row)
            method = f"memory budget {budget_bytes / GIB:.2f} GiB ({budget_how}); {line}"
            peak_how = "peak RSS (VmHWM, reset before the probe) over one engine decode step at max_batch"
        free()
        points.append(
            MaxBatchPoint(
                context=ctx,
                max_batch=batch,
                limit=limit,  # type: ignore[arg-type]
                method=method,
                budget_bytes=budget_bytes,
                bytes_at_max=None if peak is None else Measured(value=peak, unit="B", how=peak_how),
                probes=probes,
            )
        )
    return points
