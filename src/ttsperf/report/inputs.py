"""Find and read the result files a report is built from: bench runs, profiles, plans, the
`profile --optimizations` table and demo summaries.

Each file is recognised by its content, not its name: a `schema` field (bench run, profile, plan),
a list of optimisation rows, or the demo's summary keys. A path named on the command line must be
one of these; a directory is searched (recursively) and files it holds that are not results are
skipped. Mixing schema versions of one kind is refused: the report would compare numbers whose
meaning may differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ttsperf.bench.results import SCHEMA as BENCH_SCHEMA
from ttsperf.bench.results import BenchRun
from ttsperf.errors import UserError
from ttsperf.i18n import N_
from ttsperf.plan.predict import Prediction
from ttsperf.plan.schema import PLAN_SCHEMA, PLAN_VERSION, Plan
from ttsperf.profile.schema import (
    PROFILE_SCHEMA,
    PROFILE_VERSION,
    READABLE_VERSIONS,
    ModelProfile,
    profile_from_raw,
)

PREDICTION = Prediction.model_fields["schema_"].default
KNOWN = (
    f"a bench run ({BENCH_SCHEMA}), a profile ({PROFILE_SCHEMA} v{PROFILE_VERSION}), a plan "
    f"({PLAN_SCHEMA} v{PLAN_VERSION}), a prediction ({PREDICTION} v1, `plan --predict -o`), "
    "`profile --optimizations` rows or a demo summary.json"
)
# The schema (and version) of each versioned kind this ttsperf reads; any other version is refused.
READS = {
    "bench": BENCH_SCHEMA,
    "profile": f"{PROFILE_SCHEMA} v{PROFILE_VERSION}",
    "plan": f"{PLAN_SCHEMA} v{PLAN_VERSION}",
    "prediction": f"{PREDICTION} v1",
}
DEMO_KEYS = {"out_dir", "recommendations", "config", "device"}
SKIP_DIRS = {".venv", ".git", "node_modules", "__pycache__"}


@dataclass
class Inputs:
    """Every result found, each with the path it came from."""

    bench: list[tuple[Path, BenchRun]] = field(default_factory=list)
    profiles: list[tuple[Path, ModelProfile]] = field(default_factory=list)
    plans: list[tuple[Path, Plan]] = field(default_factory=list)
    predictions: list[tuple[Path, Prediction]] = field(default_factory=list)
    optimizations: list[tuple[Path, list[dict[str, Any]]]] = field(default_factory=list)
    demos: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "path: why", files in searched directories

    def files(self) -> list[tuple[Path, str]]:
        kinds = (
            (N_("bench run"), self.bench),
            (N_("profile"), self.profiles),
            (N_("plan"), self.plans),
            (N_("prediction"), self.predictions),
            (N_("optimisations"), self.optimizations),
            (N_("demo summary"), self.demos),
        )
        return [(p, kind) for kind, items in kinds for p, _ in items]


def _kind_and_version(raw: Any) -> tuple[str, str] | None:
    """('bench'|'profile'|'plan'|'optimizations'|'demo', version label) or None if not a result."""
    if isinstance(raw, list):
        if raw and all(isinstance(r, dict) and "variant" in r and "applies" in r for r in raw):
            return "optimizations", ""
        return None
    if not isinstance(raw, dict):
        return None
    schema = raw.get("schema")
    if isinstance(schema, str):
        if schema.startswith("ttsperf.benchrun/"):
            return "bench", schema
        if schema == PROFILE_SCHEMA:
            # a version-1 profile is a valid version 2 without max_batch: one version for the report
            version = PROFILE_VERSION if raw.get("version") in READABLE_VERSIONS else raw.get("version")
            return "profile", f"{schema} v{version}"
        if schema == PLAN_SCHEMA:
            return "plan", f"{schema} v{raw.get('version')}"
        if schema == PREDICTION:
            return "prediction", f"{schema} v{raw.get('version')}"
    if DEMO_KEYS <= raw.keys():
        return "demo", ""
    return None


def _what_it_is(raw: Any) -> str:
    if isinstance(raw, dict):
        keys = ", ".join(sorted(raw)[:5])
        schema = f"schema {raw['schema']!r}, " if "schema" in raw else "no 'schema' field, "
        return f"a JSON object ({schema}keys {keys}{', ...' if len(raw) > 5 else ''})"
    if isinstance(raw, list):
        return f"a JSON list of {len(raw)} item(s) that are not optimisation rows"
    return f"a JSON {type(raw).__name__}"


def _read_json(path: Path) -> tuple[Any, str | None]:
    """(parsed JSON, None) or (None, why it is not readable JSON)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, "a binary file, not JSON"
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON (syntax error at line {exc.lineno}: {exc.msg})"


def _candidates(root: Path) -> list[Path]:
    found = []
    for p in sorted(root.rglob("*.json")):
        if not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(root).parts[:-1]):
            found.append(p)
    return found


def read_inputs(paths: list[str | Path]) -> Inputs:
    """Read every named file and every result file under every named directory."""
    if not paths:
        raise UserError("RUN_OR_DIR: give at least one result file or directory, e.g. runs/demo")
    classified: list[tuple[Path, str, str, Any]] = []  # path, kind, version, raw
    inputs = Inputs()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise UserError(f"{path}: no such file or directory (expected a result file or a directory)")
        if path.is_dir():
            found = 0
            for cand in _candidates(path):
                raw, why = _read_json(cand)
                kv = None if why else _kind_and_version(raw)
                if kv is None:
                    inputs.skipped.append(f"{cand}: {why or 'not a ttsperf result'}")
                    continue
                classified.append((cand, *kv, raw))
                found += 1
            if not found:
                raise UserError(
                    f"no runs in {given}: the directory holds no result files (looked for {KNOWN})"
                )
            continue
        raw, why = _read_json(path)
        if why:
            raise UserError(f"{path}: {why}; expected {KNOWN}")
        kv = _kind_and_version(raw)
        if kv is None:
            raise UserError(f"{path}: not a ttsperf result: it is {_what_it_is(raw)}; expected {KNOWN}")
        classified.append((path, *kv, raw))
    _check_versions(classified)
    seen: set[Path] = set()
    for path, kind, _version, raw in classified:
        if path.resolve() in seen:  # named twice, or a file inside a named directory
            continue
        seen.add(path.resolve())
        _load_one(inputs, path, kind, raw)
    return inputs


def _check_versions(classified: list[tuple[Path, str, str, Any]]) -> None:
    by_kind: dict[str, dict[str, Path]] = {}
    for path, kind, version, _ in classified:
        by_kind.setdefault(kind, {}).setdefault(version, path)
    for kind, versions in by_kind.items():
        if len(versions) > 1:
            (v1, p1), (v2, p2) = list(versions.items())[:2]
            raise UserError(
                f"{p1} is {v1} but {p2} is {v2}: results of different schema versions cannot be "
                f"reported together (this ttsperf reads {READS[kind]}); re-run one of them"
            )
        ((version, path),) = versions.items()
        if kind in READS and version != READS[kind]:
            raise UserError(f"{path}: schema version {version}, this ttsperf reads {READS[kind]}; re-run it")


def _load_one(inputs: Inputs, path: Path, kind: str, raw: Any) -> None:
    try:
        if kind == "bench":
            inputs.bench.append((path, BenchRun.model_validate(raw)))  # schema checked above
        elif kind == "profile":
            inputs.profiles.append((path, profile_from_raw(raw, path)))
        elif kind == "plan":
            inputs.plans.append((path, Plan.model_validate(raw)))
        elif kind == "prediction":
            inputs.predictions.append((path, Prediction.model_validate(raw)))
        elif kind == "optimizations":
            inputs.optimizations.append((path, raw))
        else:
            inputs.demos.append((path, raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UserError(f"{path}: field {where!r}: {err['msg']} (a {kind} file of another shape?)") from None
