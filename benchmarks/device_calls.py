"""Kernel launches and host syncs on the engine's critical path, counted on the meta device: per
prefilled request, per decode step and per turn in which rows leave (issue 33's must-show), this
tree beside another, eager and with CUDA graphs.

    git worktree add /tmp/base-3dd0b04 3dd0b04
    .venv/bin/python benchmarks/device_calls.py --base /tmp/base-3dd0b04

Each tree (its own code through PYTHONPATH, in its own process) builds the engine's runner for
`chattts` on the meta device (no storage, no compute: what the device is asked to do is all there
is) with max batch 16, and runs its own calls under a TorchDispatchMode:
- **launches**: aten ops on device tensors that launch a kernel on a GPU (profile/kernels.py's
  rule: no views, allocations or metadata ops), host-side ops (tokens, seeds) not counted. With
  `graphs`, a bucket's replay is one launch and the ops inside it are its graph's nodes;
- **blocking copies**: host-to-device copies from memory the code does not pin on CUDA (not
  model/transfer.py's packed copy or a buffer it packed), and `torch.tensor`/`torch.as_tensor`
  straight onto the device. From pageable memory CUDA synchronizes the stream before the copy,
  `non_blocking=True` or not;
- **host reads**: where the host waits for the device: a blocking device-to-host copy or a scalar
  read (on meta it raises: counted once, where the call stops), or the read of a status queued
  earlier into host memory (BatchState.receive, where a tree has it);
- **on the critical path** (`critical`): host reads with no device work queued behind what they
  wait for, so the device idles from then until the host launches again. A blocking read always
  is; a queued status read after the next step was launched is not (issue 33 item 3).
Parts: `prefill n` (Runner.prefill of n rows into an empty batch; per request = / n), `step 8`
(Runner.step at batch 8: launch and read its own status at once), `step 8 ahead` (where a tree
has Runner.launch: the engine's turn one step ahead on a GPU, launch step N+1 then read step N's
status), `turn of 4` (the same with 4 decode steps a turn, `serve --steps-per-turn 4`, where a
tree has it: per step = / 4), `audio of 4` (the turn's audio call for 4 streamed chunks:
Runner.emit, which waits for the samples, or where a tree has it Runner.launch_audio, whose
samples the engine takes at the next turn one step ahead; where a tree's call can make the 16-bit
PCM, as serve's engine process has it, it does), `leave 2 of 8` (Runner.remove of
slots 0 and 3 at batch 8). The base is counted eagerly (it has no graphed prefill; its decode
graphs are counted as in this tree only where it has `graphs_without_capture`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROWS = (1, 2, 4, 8)
TEXT = "四川美食确实以辣闻名，但也有不辣的选择。比如甜水面、赖汤圆、蛋烘糕、叶儿粑等，这些小吃口味温和。"


def measure(graphs: bool) -> dict[str, dict]:
    """In this process: the tree on sys.path (PYTHONPATH) is the one counted."""
    import inspect

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from ttsperf.engine import runner as runner_module
    from ttsperf.model.config import CHATTTS
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams
    from ttsperf.model.tokenizer import Tokenizer, build_synthetic_tokenizer
    from ttsperf.model.weights import build_model
    from ttsperf.profile.kernels import launches_kernel

    def on_device(x) -> bool:
        return isinstance(x, torch.Tensor) and x.device.type == "meta"

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.launches = self.nodes = self.blocking = self.reads = self.critical = 0
            self.in_graph = self.packed = 0
            self.clock = 0  # device calls queued so far (launches and graph nodes), never reset
            self.queued: list[int] = []  # the clock at each status copy queued, oldest first

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            flat = [*args, *kwargs.values()]
            name = func.overloadpacket.__name__
            if (
                name == "copy_"
                and self._device_to_host(args)
                and (args[2:] or [kwargs.get("non_blocking")])[0]
            ):
                self.launches += 1  # a status copy queued into host memory: its read comes later
                self.clock += 1
                self.queued.append(self.clock)
                return args[0]
            out = func(*args, **kwargs)
            outs = out if isinstance(out, (tuple, list)) else [out]
            if name == "copy_" and self._host_to_device(args):
                self.host_copy(args[1])
            if launches_kernel(func) and (any(map(on_device, flat)) or any(map(on_device, outs))):
                self.clock += 1
                if self.in_graph:
                    self.nodes += 1
                else:
                    self.launches += 1
            return out

        @staticmethod
        def _device_to_host(args) -> bool:
            return isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu" and on_device(args[1])

        def read_queued(self) -> None:
            """The host waits for the oldest queued status: on the critical path if nothing was
            queued behind it."""
            self.reads += 1
            self.critical += self.clock == self.queued.pop(0)

        @staticmethod
        def _host_to_device(args) -> bool:
            return isinstance(args[1], torch.Tensor) and args[1].device.type == "cpu" and on_device(args[0])

        def host_copy(self, src) -> None:
            """A host-to-device copy: a launch (a memcpy on the stream), and from pageable memory
            a stream sync; to_device's copies are one, pinned (on CUDA)."""
            if self.packed:
                return
            self.clock += 1
            if not self.in_graph:
                self.launches += 1
            if id(src) not in pinned:
                self.blocking += 1

    count = Count()

    def as_graph(fn):
        """A bucket's replay: one launch; what runs inside is its graph's nodes."""

        def replay(*a, **kw):
            count.launches += 1
            count.clock += 1
            count.in_graph += 1
            try:
                return fn(*a, **kw)
            finally:
                count.in_graph -= 1

        return replay

    pinned: set[int] = set()  # buffers the code pins on CUDA (transfer.pack), by id while alive
    try:
        import ttsperf.model.transfer as transfer
        from ttsperf.model.transfer import to_device as real_to_device

        real_pack = transfer.pack

        def pinned_pack(tensors, pin=False):
            buffer, offsets = real_pack(tensors, pin)
            pinned.add(id(buffer))
            return buffer, offsets

        for module in list(sys.modules.values()):
            if getattr(module, "pack", None) is real_pack:
                module.pack = pinned_pack
    except ImportError:  # a tree before the packed copy
        real_to_device = None

    def packed_to_device(device, *tensors):  # one pinned, packed copy on CUDA; a copy each on meta
        if any(t.device.type == "cpu" for t in tensors) and not count.in_graph:
            count.launches += 1
            count.clock += 1
        count.packed += 1
        try:
            return real_to_device(device, *tensors)
        finally:
            count.packed -= 1

    for module in list(sys.modules.values()):
        if real_to_device and getattr(module, "to_device", None) is real_to_device:
            module.to_device = packed_to_device
    real_to = torch.Tensor.to

    def to(self, *a, **kw):  # under inference mode .to()'s copy never reaches a dispatch mode
        out = real_to(self, *a, **kw)
        if self.device.type == "cpu" and on_device(out):
            count.host_copy(self)
        return out

    torch.Tensor.to = to
    for name in ("tensor", "as_tensor"):  # straight onto the device: a blocking copy (invisible below)
        real = getattr(torch, name)

        def onto_device(data, *a, _real=real, **kw):
            device = kw.get("device")
            if device is not None and torch.device(device).type != "cpu" and not on_device(data):
                count.blocking += 1
            return _real(data, *a, **kw)

        setattr(torch, name, onto_device)

    model = build_model(CHATTTS, seed=None, device="meta")
    pipe = Pipeline(
        model,
        Tokenizer(build_synthetic_tokenizer(CHATTTS.gpt.num_text_tokens)),
        synthetic=True,
        device="meta",
    )
    report = {"compile": {"applied": False, "note": ""}, "cuda_graphs": {"applied": False, "note": ""}}
    params = inspect.signature(runner_module.Runner).parameters
    extra = {"graphs_without_capture": True} if graphs and "graphs_without_capture" in params else {}
    if graphs and not extra:
        return {}
    if "pcm" in params:  # the audio call makes the PCM, as in serve's engine process
        extra["pcm"] = True
    r = runner_module.Runner(
        pipe, max_batch=16, max_prompt_tokens=512, max_new_tokens=160, lookahead_steps=4,
        switch_report=report, **extra,
    )  # fmt: skip
    if graphs:
        r.graphed.run = as_graph(r.graphed.run)
        prefill = getattr(r, "graphed_prefill", None)
        if prefill is not None:  # what a bucket records is its graph: its replay is one launch
            for name in ("_record", "_record_first_codes"):  # the latter where a tree has it
                real_record = getattr(prefill, name, None)
                if real_record is not None:
                    setattr(prefill, name, lambda *a, _real=real_record: as_graph(_real(*a)))

    def admissions(n: int) -> list:
        return [
            runner_module.Admission(TEXT, "[speed_5]", SamplingParams(seed=i), i, 160, True) for i in range(n)
        ]

    fields = ("launches", "nodes", "blocking", "reads", "critical")

    def counted(fn) -> dict:
        for field in fields:
            setattr(count, field, 0)
        try:
            with torch.inference_mode(), count:
                fn()
        except (RuntimeError, NotImplementedError) as exc:  # a blocking host read of a meta tensor
            if "meta" not in str(exc).lower() and "data" not in str(exc).lower():
                raise
            count.reads += 1
            count.critical += 1  # the host waits for all it queued: nothing is queued behind it
        return {f: getattr(count, f) for f in fields}

    state_class = type(r.state)
    if hasattr(state_class, "receive"):  # a tree that reads a queued status later
        real_receive = state_class.receive

        def receive(self):
            count.read_queued()
            return real_receive(self)

        state_class.receive = receive
    else:  # an earlier tree: its sync queues the status copy, then waits for the stream at once
        real_sync = state_class.sync

        def sync(self):
            taken = real_sync(self)
            count.read_queued()
            return taken

        state_class.sync = sync

    out = {}
    with torch.inference_mode():
        if graphs:  # warm every bucket first (as serve does before /readyz): replays below
            r.graphed_prefill.warm(r.num_vq) if getattr(r, "graphed_prefill", None) else None
    for n in ROWS:
        r.state.truncate(0)
        out[f"prefill {n}"] = counted(lambda n=n: r.prefill(admissions(n)))
    r.state.truncate(0)
    with torch.inference_mode():
        r.prefill(admissions(8))
    out["step 8"] = counted(r.step)
    if not hasattr(r, "launch"):
        r.state.host.positions[:8] += 1  # as the step would have, had its read returned
    else:  # step N in flight (uncounted), then the turn: launch step N+1, read step N's status
        with torch.inference_mode(), count:
            r.launch()
        out["step 8 ahead"] = counted(lambda: (r.launch(), r.collect()))
        with torch.inference_mode(), count:
            r.collect()
        if "steps" in inspect.signature(r.launch).parameters:  # serve --steps-per-turn
            with torch.inference_mode(), count:
                r.launch(4)
            out["turn of 4"] = counted(lambda: (r.launch(4), r.collect()))
            with torch.inference_mode(), count:
                r.collect()
    # the audio call of 4 streamed chunks in a turn: where a tree has launch_audio, one step ahead
    # (a GPU's default) the engine launches it and takes its samples at the next turn
    windows = [r.window(slot, 16, 0, final=False) for slot in range(4)]
    if graphs and getattr(r, "graphed_audio", None) is not None:
        real_audio_record = r.graphed_audio._record

        def audio_record(*a):
            static, replay = real_audio_record(*a)
            return static, as_graph(replay)

        r.graphed_audio._record = audio_record
    launch = getattr(r, "launch_audio", r.emit)
    out["audio of 4"] = counted(lambda: launch(windows))
    out["leave 2 of 8"] = counted(lambda: r.remove([0, 3]))
    return out


def run_tree(src: Path, graphs: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    args = [sys.executable, __file__, "--inner", *(["--graphs"] if graphs else [])]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the count in {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, help="another tree (a worktree of an earlier commit), side by side")
    p.add_argument("--json", action="store_true", help="print the counts as JSON: tree -> mode -> part")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--graphs", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.inner:
        print(json.dumps(measure(a.graphs)))
        return
    here = Path(__file__).resolve().parent.parent
    trees = {"this tree": here} | ({a.base.name: a.base} if a.base else {})
    rows = []
    counted: dict[str, dict[str, dict]] = {}
    for name, root in trees.items():
        for graphs in (False, True):
            mode = "graphs" if graphs else "eager"
            got = counted.setdefault(name, {})[mode] = run_tree(root / "src", graphs)
            for part, c in got.items():
                rows.append((name, mode, part, c))
    if a.json:
        print(json.dumps(counted))
        return
    print("chattts on the meta device, max batch 16; per request = per call / rows (a turn: / steps)")
    print(f"{'tree':<13}{'mode':<7}{'part':<13}{'launches':>9}{'per req':>8}", end="")
    print(f"{'nodes':>6}{'blocking':>9}{'reads':>6}{'critical':>9}")
    for name, mode, part, c in rows:
        n = int(part.split()[-1]) if part.startswith(("prefill", "turn of")) else None  # rows, steps
        per = f"{c['launches'] / n:.0f}" if n else "-"
        print(
            f"{name[:12]:<13}{mode:<7}{part:<13}{c['launches']:>9}{per:>8}{c['nodes']:>6}"
            f"{c['blocking']:>9}{c['reads']:>6}{c.get('critical', '-'):>9}"
        )
    print("command: .venv/bin/python benchmarks/device_calls.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
