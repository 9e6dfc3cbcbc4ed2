"""What moving rows' KV slots costs on this CPU: one gather and one scatter for all the moves (a
card's way: two calls whatever their number) against one slice copy of K and V per move (a CPU's,
where a copy costs its bytes). Issue 33: rows leaving took most of chattts's host work per step.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/kv_moves.py \\
        [--config chattts] [--max-batch 16] [--positions 300,600] \\
        [--moves 1,4] [--repeats 15]

`model/kv.py`'s `KVSlots` of `--config` (its layers, KV heads and head size; fp32, one torch
thread; every slot holds `--max-prompt-tokens` + `--max-new-tokens` + 1 positions, as serve's),
filled with noise. For each count of moves (rows from the end of the batch into slots at its start)
and each length (the movers' furthest position: what a move copies), the median of `--repeats`
calls of `KVSlots.move_many` each way, alternating: without the moves on the host (the card's
gather and scatter) and with them (a CPU's slice copies). Prints a table and the command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import torch  # noqa: E402
from _bench_common import DocHelp, machine  # noqa: E402

from ttsperf import facts as F  # noqa: E402
from ttsperf.model.config import CONFIGS  # noqa: E402
from ttsperf.model.kv import KVSlots  # noqa: E402


def counts(text: str) -> list[int]:
    """A comma-separated list of positive whole numbers (argparse's type: a bad one is one line)."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive whole numbers, e.g. 300,600")
    return values


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    p.add_argument("--config", default="chattts", choices=sorted(CONFIGS), help="the model's slots")
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--max-prompt-tokens", type=int, default=512)
    p.add_argument("--max-new-tokens", type=int, default=F.MAX_NEW_TOKENS)
    p.add_argument(
        "--positions", type=counts, default="300,600", help="lengths moved (a zh-8s row reaches ~430)"
    )
    p.add_argument("--moves", type=counts, default="1,4", help="rows moved at once")
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    torch.set_num_threads(1)
    g = CONFIGS[args.config].gpt
    capacity = args.max_prompt_tokens + args.max_new_tokens + 1
    slots = KVSlots(
        g.num_hidden_layers, args.max_batch, g.num_key_value_heads, capacity,
        g.hidden_size // g.num_attention_heads, dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip
    slots.k.normal_()
    slots.v.normal_()
    print(f"{machine()}; {args.config}, max batch {args.max_batch}, fp32, one torch thread")
    print("| moves | positions | MB copied | gather+scatter ms | slice copies ms | ratio |")
    print("|---|---|---|---|---|---|")
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: expected 1 or more")
    if 2 * max(args.moves) > args.max_batch:
        p.error(f"--moves {max(args.moves)}: expected at most half of --max-batch {args.max_batch}")
    for n in args.moves:
        src, dst = torch.arange(args.max_batch - 1, args.max_batch - 1 - n, -1), torch.arange(n)
        pairs = list(zip(src.tolist(), dst.tolist(), strict=True))
        for length in args.positions:
            timed: dict[str, list[float]] = {"indexed": [], "sliced": []}
            for _ in range(args.repeats):
                for way, moves in (("indexed", None), ("sliced", pairs)):
                    t0 = time.perf_counter()
                    slots.move_many(src, dst, length, moves)
                    timed[way].append(time.perf_counter() - t0)
            indexed, sliced = (1e3 * statistics.median(timed[w]) for w in ("indexed", "sliced"))
            per_move = 2 * g.num_hidden_layers * g.num_key_value_heads * length * slots.k.shape[-1] * 4
            mb = n * per_move / 1e6
            print(f"| {n} | {length} | {mb:.1f} | {indexed:.2f} | {sliced:.2f} | {indexed / sliced:.1f}x |")
    command = ["flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/kv_moves.py", *sys.argv[1:]]
    print("command: " + " ".join(command))


if __name__ == "__main__":
    main()
