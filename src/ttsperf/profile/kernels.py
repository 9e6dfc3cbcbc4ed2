"""Device kernels a piece of the engine launches, counted on a CPU.

eager: every aten op that reaches the dispatcher below autograd (a TorchDispatchMode sees them
after composite ops decompose), less those that launch nothing on a GPU — views and aliases
(`OpOverload.is_view`, unless the op had to copy: a reshape of a non-contiguous tensor, a `to`
that converts) and the metadata/allocation ops in NO_KERNEL. One op is counted as one
kernel; a few CUDA ops launch more than one (sort, cumsum, topk), so the count is a floor.

Counting needs no real compute: under FakeTensorMode ops run on their meta kernels, so `chattts`
at batch 256 is counted in milliseconds. Code that reads a value on the host (`.item()`, numpy)
cannot run fake; the parts counted here are the device work between host reads.

compile: the kernels in Inductor's generated code (`compiled_kernels`): the calls in the output
module's `call()` — fused kernels Inductor wrote plus the extern kernels it calls (mm, convolution,
fft) — less allocations and reinterpretations.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
# Ops that allocate, alias or ask for metadata: no kernel on a GPU. (Views are found by is_view.)
NO_KERNEL = frozenset(
    {
        "empty.memory_format", "empty_strided.default", "empty_like.default", "new_empty.default",
        "new_empty_strided.default", "lift_fresh.default", "detach.default", "alias.default",
        "sym_size.int", "sym_stride.int", "sym_numel.default", "sym_storage_offset.default",
        "is_same_size.default", "_local_scalar_dense.default", "_unsafe_view.default", "resize_.default",
        "set_.source_Storage_storage_offset", "_reshape_alias.default"
    }
)  # fmt: skip
EXCLUDED_HOW = (
    "views and aliases (OpOverload.is_view: view, expand, transpose, slice, select, unsqueeze, ...), "
    "allocation (empty*, new_empty*) and metadata ops (detach, alias, lift_fresh, sym_*, "
    "_local_scalar_dense) excluded"
)


def op_name(func: torch._ops.OpOverload) -> str:
    return f"{func.overloadpacket.__name__}.{func._overloadname}"


def launches_kernel(func: torch._ops.OpOverload) -> bool:
    return not func.is_view and op_name(func) not in NO_KERNEL


class OpCounter(TorchDispatchMode):
    """Counts aten ops by name while active; `kernels` keeps those that launch a kernel."""

    def __init__(self):
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.kernels: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = op_name(func)
        self.ops[name] += 1
        if launches_kernel(func):
            self.kernels[name] += 1  # before the call: a copy off the meta device raises in it
            return func(*args, **(kwargs or {}))
        out = func(*args, **(kwargs or {}))
        if _copied(func, args, out):
            self.kernels[name] += 1
        return out


def _copied(func, args, out) -> bool:
    """A view-like op (reshape, to, contiguous) that had to copy: its output is not its input's alias."""
    first = args[0] if args else None
    if not (func.is_view and isinstance(out, torch.Tensor) and isinstance(first, torch.Tensor)):
        return False
    return not torch._C._is_alias_of(out, first)


def count_ops(fn: Callable[[], object]) -> OpCounter:
    """Run fn once under an OpCounter -> the counter."""
    counter = OpCounter()
    with counter:
        fn()
    return counter


# A call in Inductor's `call()`: `name(`, `extern_kernels.name(`, `aten.name.overload(`, `name.run(`.
_CALL = re.compile(r"^\s*(?:\w+ = )?((?:extern_kernels|aten|torch\.ops\.aten)\.\w+|\w+)(?:\.\w+)?\(")
_NOT_KERNELS = re.compile(
    r"^(empty_strided\w*|reinterpret_tensor|assert_size_stride|assert_alignment|del|return|"
    r"buf\d+|get_raw_stream|int|float|len|print|torch|range|\w*guard\w*|alloc_from_pool|"
    r"_reinterpret_tensor|\w*empty\w*|as_strided|async_compile|set_device|device)$"
)


def compiled_kernels(code: str) -> Counter[str]:
    """Kernel calls in Inductor's output code: the body of its `call(args)` function."""
    body = code.split("def call(", 1)[-1].split("\ndef ", 1)[0]
    found: Counter[str] = Counter()
    for line in body.splitlines()[1:]:
        match = _CALL.match(line)
        if match is None:
            continue
        name = match.group(1).split(".")[-1] if "." in match.group(1) else match.group(1)
        if not _NOT_KERNELS.match(name):
            found[name] += 1
    return found
