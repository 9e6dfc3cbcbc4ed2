"""One precedence for bench settings: defaults < config file < environment (TTSPERF_BENCH_*) < flags.

Resolved once; the result and where each value came from are written into run.json, so a run can be
repeated without guessing which of the four layers set what.

    # bench.toml (or .json): any BenchConfig field, e.g.
    urls = ["http://127.0.0.1:8080"]
    concurrency = [1, 4, 16]
    slo = "ttfa_p99=300ms,error_rate=1%"

    TTSPERF_BENCH_REQUESTS=500 ttsperf bench --config bench.toml --warmup 10
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ttsperf.bench.api import BenchConfig
from ttsperf.errors import UserError

ENV_PREFIX = "TTSPERF_BENCH_"
FIELDS = {f.name: str(f.type) for f in dataclasses.fields(BenchConfig)}


def _coerce(name: str, value: Any, where: str) -> Any:
    """A value from a file or the environment -> the field's type, or a UserError naming `where`."""
    kind = FIELDS[name].split("|")[0].strip()
    optional = "None" in FIELDS[name]
    try:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            if optional:
                return None
            raise ValueError("a value is required")
        if kind.startswith("list["):
            elem = {"list[int]": int, "list[float]": float}.get(kind, str)
            items = value if isinstance(value, list) else [v for v in str(value).split(",") if v.strip()]
            return [elem(v.strip() if isinstance(v, str) else v) for v in items]
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("expected an integer")
            return int(value)
        if kind == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: {value!r} is not a valid {FIELDS[name]} ({exc})") from None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--config {path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UserError(f"--config {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    elif path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise UserError(f"--config {path}: TOML needs Python >= 3.11; use a .json file") from None
        try:
            data = tomllib.loads(raw)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"--config {path}: not TOML ({exc})") from None
    else:
        raise UserError(f"--config {path}: expected a .toml or .json file")
    if not isinstance(data, dict):
        raise UserError(f"--config {path}: expected a table/object of settings at the top")
    return data


def resolve(
    flags: Mapping[str, Any],
    file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[BenchConfig, dict[str, str]]:
    """`flags` holds only the settings given on the command line (field name -> value)."""
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    if file:
        path = Path(file)
        for key, v in _read_file(path).items():
            name = key.replace("-", "_")
            if name not in FIELDS:
                raise UserError(
                    f"--config {path}: unknown setting {key!r}; expected one of {', '.join(FIELDS)}"
                )
            values[name], source[name] = _coerce(name, v, f"--config {path}: {key}"), "file"
    for key, v in (environ or {}).items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in FIELDS:
            raise UserError(
                f"{key}: unknown setting; expected {ENV_PREFIX}<one of {', '.join(FIELDS)}> (upper case)"
            )
        values[name], source[name] = _coerce(name, v, key), "env"
    for name, v in flags.items():
        values[name], source[name] = v, "flag"
    cfg = BenchConfig(**values)
    return cfg, {name: source.get(name, "default") for name in FIELDS}
