"""The engine's core process: it owns the model and the device, and nothing else runs there.

An HTTP front (server/) never imports torch and never shares a GIL with the loop that drives the
device (measured on an H200: one process doing both held ~150 listeners at 100% of one core while
the card idled half the time). The front starts this process through engine/client.py; they talk
over one pipe (engine/wire.py). Here two threads share the GIL, and only one is busy:
- the engine's worker thread runs the scheduler's turns (admit, step, audio) as in-process; after
  each turn it sends everything the turn produced in one message (`Core.flush`);
- this main thread reads the pipe: submissions (tokenized once, here), cancellations, calls for
  /healthz and /metrics, and stop. It blocks in the pipe otherwise.

Ready means warm: the core says "ready" only after the engine compiled, or captured, what it will
run (Engine.start), so no request pays for it; then it freezes what the start-up built
(engine/gc_pauses.py), so that no collection while serving walks it again.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import replace
from multiprocessing.connection import Connection

import torch

from ttsperf.audio import to_pcm16
from ttsperf.engine import gc_pauses
from ttsperf.engine.engine import Engine
from ttsperf.engine.oom import is_oom
from ttsperf.engine.types import Accepted, AudioChunk, Event, PcmChunk, RequestHandle
from ttsperf.engine.wire import CoreSpec, dumps, loads
from ttsperf.errors import UserError
from ttsperf.model.pipeline import Pipeline

log = logging.getLogger("ttsperf.engine")


def main(conn: Connection, spec: CoreSpec) -> None:
    """The process's entry point (engine/client.py starts it): build, warm, say ready, serve."""
    logging.basicConfig(
        level=spec.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if spec.threads is not None:  # engines sharing a CPU's cores (engine/pool.py)
        torch.set_num_threads(spec.threads)
    try:
        # its chunks as the PCM the front sends, made by the audio call on the device
        engine = Engine(Pipeline.from_spec(spec.model), replace(spec.engine, pcm=True), spec.switches)
        core = Core(engine, conn)
        core.send(("built", {"max_batch": engine.max_batch}))  # its slots allocated; warm-up next
        engine.start()
    except UserError as exc:  # a setting that cannot run here (e.g. --max-batch): its own line
        conn.send_bytes(dumps(("refused", str(exc))))
        raise SystemExit(2) from None
    except BaseException as exc:  # noqa: BLE001 - the front says why, in one line
        conn.send_bytes(dumps(("fatal", _why(exc))))
        raise SystemExit(1) from None
    # what the start-up built lives as long as the process: no collection walks it again
    log.info("engine: %d start-up objects frozen (no collection walks them)", gc_pauses.freeze_startup_heap())
    gc_pauses.this_process()  # counts the collector's pauses from here, for /metrics
    core.send(("ready", core.describe()))
    core.serve()
    _leave()


def _leave() -> None:
    """Exit at once: the engine has stopped and said so, and nothing is left to write. Tearing down
    an interpreter that imported torch and transformers takes ~1 s (1.0 s against 0.03 s with
    os._exit, 2-core EPYC), which `serve`'s SIGTERM and every test's server would wait out."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def _why(exc: BaseException) -> str:
    """Why the engine could not start, in one line; out of memory says what to lower."""
    text = " ".join(str(exc).split())
    if is_oom(exc):
        return (
            f"out of memory at start ({text[:160]}): lower --max-batch, or the tokens per slot "
            "(--max-prompt-tokens, --max-new-tokens)"
        )
    return f"{type(exc).__name__}: {text}"


class Core:
    def __init__(self, engine: Engine, conn: Connection):
        self.engine, self.conn = engine, conn
        self._lock = threading.Lock()  # one writer on the pipe; also orders Accepted before events
        self._outbox: list[tuple[int, object]] = []
        self._handles: dict[int, RequestHandle] = {}  # the front's id -> the engine's handle
        self._stopped = threading.Event()
        engine.after_turn = self.flush

    # ------------------------------------------------------------------ out

    def send(self, message: tuple) -> None:
        data = dumps(message)
        with self._lock:
            self.conn.send_bytes(data)

    def _sink(self, front_id: int, event: Event) -> None:
        """A request's event, on the worker thread: kept for the turn's message."""
        if isinstance(event, AudioChunk):  # not made by the call (an engine without pcm): made here
            event = PcmChunk(to_pcm16(event.samples), event.index)
        elif not isinstance(event, PcmChunk):  # its last event
            self._handles.pop(front_id, None)
        self._outbox.append((front_id, event))

    def flush(self) -> None:
        """Everything the turn produced, in one message."""
        with self._lock:
            batch, self._outbox = self._outbox, []
            if batch:
                self.conn.send_bytes(dumps(("events", batch)))

    # ------------------------------------------------------------------ in

    def serve(self) -> None:
        """Read the pipe until the front says stop (or goes away)."""
        while not self._stopped.is_set():
            try:
                if not self.conn.poll(0.05):  # how soon a finished stop is seen: the exit waits on it
                    continue
                message = loads(self.conn.recv_bytes())
            except (EOFError, OSError):  # the front is gone: nobody to answer
                self.engine.stop(drain=False, timeout=5)
                return
            getattr(self, "_on_" + message[0])(*message[1:])

    def _on_submit(self, front_id: int, request) -> None:
        e = self.engine
        try:
            ids = e.prompt_ids(request)  # the text is tokenized here once, for the front and the prefill
            with self._lock:  # Accepted goes out before any event of the request
                sink = lambda _, event: self._sink(front_id, event)  # noqa: E731
                handle = e.submit(request, sink=sink, prompt_ids=ids)
                self._handles[front_id] = handle
                self._outbox.append((front_id, Accepted(len(ids))))
        except Exception as exc:  # noqa: BLE001 - QueueFull, NotAccepting, TextTooLong, the tokenizer's UserError
            self.send(("rejected", front_id, exc))

    def _on_cancel(self, front_id: int) -> None:
        handle = self._handles.get(front_id)
        if handle is not None:
            handle.cancel()

    def _on_call(self, token: int, name: str) -> None:
        answer = {"status": self.status, "describe": self.describe, "metrics": self.metrics}[name]
        self.send(("reply", token, answer()))

    def _on_stop(self, drain: bool, timeout: float | None) -> None:
        def stop() -> None:  # a drain takes a while: meanwhile cancellations still arrive here
            self.engine.stop(drain, timeout)
            self.flush()
            self.send(("stopped",))
            self._stopped.set()

        threading.Thread(target=stop, name="ttsperf-core-stop", daemon=True).start()

    # ------------------------------------------------------------------ what it says

    def status(self) -> dict:
        """What /readyz says, polled often by balancers: kept small."""
        e = self.engine
        return {"queue_depth": e.queue_depth(), "running": e.running(), "ready": e.ready}

    def describe(self) -> dict:
        answered = self.engine.stats.answered()
        return {
            **self.engine.describe(),
            **self.status(),
            "answered": answered,
            "threads": torch.get_num_threads(),
        }

    def metrics(self) -> dict:
        e = self.engine
        return {
            "queue_depth": e.queue_depth(),
            "running": e.running(),
            "pending": e.pending(),
            "max_batch": e.max_batch,
            "effective_max_batch": e.effective_max_batch,
            "ready": e.ready,
            "stats": e.stats.snapshot(),
            "device_memory": device_memory(e),
            "gc": gc_pauses.this_process().snapshot(),
        }


def device_memory(engine: Engine) -> dict[str, int]:
    """The device's memory (CUDA: allocated, reserved, free, total) or, on a CPU, this process's."""
    import psutil
    import torch

    device = engine.pipe.device
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return {
            "allocated": torch.cuda.memory_allocated(device),
            "reserved": torch.cuda.memory_reserved(device),
            "free": free,
            "total": total,
        }
    return {
        "process_rss": psutil.Process().memory_info().rss,
        "host_available": psutil.virtual_memory().available,
    }
