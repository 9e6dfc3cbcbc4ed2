"""What the streamed PCM costs crossing the pipe between the engine's core process and the HTTP
front, at a given number of listeners: the CPU each side spends per turn's message (pickling and
writing it there, reading and unpickling it here), and the share of a core that is at that rate.
It decides whether shared memory for the PCM (issue 33 item 1) is worth its complexity.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/pcm_pipe.py --listeners 600

Each listener takes 24,000 int16 samples a second (48 kB/s) of real-time audio; the core sends one
"events" message per turn (engine/wire.py) holding the chunks of the rows that emitted in that
turn, made here as `PcmChunk`s of distinct bytes (pickle would send one object shared by several
only once). The two processes and the pipe are real (multiprocessing.Pipe, as engine/client.py
starts the core); CPU is each side's thread time, medians of `--rounds` runs.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ttsperf.engine.types import PcmChunk  # noqa: E402
from ttsperf.engine.wire import dumps, loads  # noqa: E402

BYTES_PER_SECOND = 24_000 * 2  # one listener's real-time PCM


def front(conn, messages: int) -> None:
    """The front's side: read and unpickle every message -> its thread's CPU seconds."""
    t0 = time.thread_time()
    for _ in range(messages):
        loads(conn.recv_bytes())
    conn.send(time.thread_time() - t0)


def one_run(listeners: int, turns_per_second: float, chunk_seconds: float, messages: int) -> tuple:
    """-> (message bytes, core's CPU s per message, front's CPU s per message)."""
    chunk = int(BYTES_PER_SECOND * chunk_seconds)
    rows = max(1, round(listeners / chunk_seconds / turns_per_second))  # chunks a turn
    events = [(i, PcmChunk(bytes([i % 256]) * chunk, i)) for i in range(rows)]
    core, other = mp.Pipe()
    reader = mp.Process(target=front, args=(other, messages))
    reader.start()
    t0 = time.thread_time()
    for _ in range(messages):
        core.send_bytes(dumps(("events", events)))
    sent = time.thread_time() - t0
    received = core.recv()
    reader.join()
    return len(dumps(("events", events))), sent / messages, received / messages


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: " + __doc__.split("\n\n")[1].strip(),
    )
    p.add_argument("--listeners", type=int, default=600, help="real-time streams (the H200 goal: 600)")
    p.add_argument("--turns-per-second", type=float, default=200.0, help="engine turns (messages) a second")
    p.add_argument("--chunk-seconds", type=float, default=0.25, help="audio per streamed chunk")
    p.add_argument("--messages", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    runs = [one_run(a.listeners, a.turns_per_second, a.chunk_seconds, a.messages) for _ in range(a.rounds)]
    size = runs[0][0]
    core, front_cpu = (statistics.median(r[i] for r in runs) for i in (1, 2))
    rate = a.listeners * BYTES_PER_SECOND / 1e6
    print(
        f"{a.listeners} listeners ({rate:.1f} MB/s of PCM), {a.turns_per_second:.0f} messages/s of "
        f"{size / 1e3:.0f} kB; medians of {a.rounds} runs of {a.messages} messages"
    )
    print(f"{'side':<34}{'CPU us/message':>15}{'% of a core':>13}")
    for side, seconds in (("core: pickle + write", core), ("front: read + unpickle", front_cpu)):
        print(f"{side:<34}{seconds * 1e6:>15.0f}{seconds * a.turns_per_second * 100:>12.1f}%")
    print("command: .venv/bin/python benchmarks/pcm_pipe.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
