"""Workloads: which texts the load test sends (the built-in sets: ttsperf/textsets.py).

The default is the guide's own sentence, so a first run compares like with like with the guide's
script; `--text-set zh-8s` is the guide's stated 8 s workload, which `plan` plans by default.
`--texts FILE` takes a .txt (one text per line) or .jsonl (one object per line, `text` required;
other fields are passed to the adapter, e.g. `voice`, `seed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ttsperf.errors import UserError
from ttsperf.textsets import GUIDE_SENTENCE, TEXT_SETS, expected_seconds

__all__ = ["GUIDE_SENTENCE", "TEXT_SETS", "Item", "Workload", "expected_seconds", "load_workload"]


@dataclass(frozen=True)
class Item:
    """One text to synthesise, with optional per-request fields from a jsonl file."""

    text: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Workload:
    name: str
    items: list[Item]

    def item(self, i: int) -> Item:
        """Texts are used in order and wrap around, so request i always carries the same text."""
        return self.items[i % len(self.items)]

    def describe(self) -> dict[str, Any]:
        chars = np.array([len(it.text) for it in self.items])
        secs = np.array([expected_seconds(it.text) for it in self.items])
        return {
            "name": self.name,
            "texts": len(self.items),
            "chars": {"min": int(chars.min()), "median": float(np.median(chars)), "max": int(chars.max())},
            "expected_audio_s": {
                "min": round(float(secs.min()), 2),
                "median": round(float(np.median(secs)), 2),
                "max": round(float(secs.max()), 2),
            },
        }


def load_workload(texts: str | None = None, text_set: str | None = None) -> Workload:
    """`--texts FILE` wins over `--text-set NAME`; neither -> the guide's sentence."""
    if texts:
        return _load_file(Path(texts))
    name = text_set or "guide"
    if name not in TEXT_SETS:
        raise UserError(f"--text-set: unknown set {name!r}; expected one of {', '.join(TEXT_SETS)}")
    return Workload(name, [Item(t) for t in TEXT_SETS[name]])


def _load_file(path: Path) -> Workload:
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--texts {path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    items: list[Item] = []
    if path.suffix.lower() == ".jsonl":
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"--texts {path}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
                raise UserError(f'--texts {path}:{n}: expected an object with a non-empty "text" string')
            items.append(Item(obj["text"], {k: v for k, v in obj.items() if k != "text"}))
    else:
        items = [Item(line.strip()) for line in raw.splitlines() if line.strip()]
    if not items:
        raise UserError(f'--texts {path}: no texts found (expected one per line, or jsonl with "text")')
    return Workload(str(path), items)
