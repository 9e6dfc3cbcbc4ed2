"""The engine's revisions: what a card measured holds for the engine that ran then, not
necessarily for today's. Bump ENGINE_REVISION when a change moves what a card measures of the
engine (host work per call, synchronizes, what runs serially with the device), and say what
changed: a profile records the revision it measured, and plan labels a card measured before the
last change, beside what it projects for today's engine.

No torch and no engine import here: profile writes it and plan reads it (plan never loads the
engine)."""

from __future__ import annotations

ENGINE_REVISION = 2
CHANGES = {
    1: "2026-12-04, tree 840e404: the engine in its own process, graphs captured before /readyz",
    2: "2026-12-04, tree 007039f: prefill sends its inputs in two copies, with no stream synchronize",
}


def changed_since(revision: int | None) -> list[str]:
    """What changed in the engine after `revision` (oldest first); [] when it is today's, or when
    the profile predates revisions (nothing to compare it with)."""
    if revision is None:
        return []
    return [CHANGES[r] for r in range(revision + 1, ENGINE_REVISION + 1)]
