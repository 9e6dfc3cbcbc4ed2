"""One precedence for the settings of bench, serve, plan and profile:
defaults < settings file < environment (TTSPERF_<COMMAND>_*) < flags.

Each setting is written once, as a field of a pydantic-settings model (`bench.settings.BenchSettings`,
`server.settings.ServeSettings`, `plan.settings.PlanSettings`, `profile.settings.ProfileSettings`):
its type, default and help, and a `Flag` where the command line spells it other than
`--field-name`. `ttsperf.cli.options` makes each command's options from those fields; `resolve()`
reads the file (json/tomllib: a table per command, or one command's keys at the top) and the
environment (pydantic-settings' EnvSettingsSource), lays the flags over them, validates once with
pydantic and records where every value came from, so a result file can say it.

    # ttsperf.toml: a table per command (or, for one command, its settings at the top)
    [bench]
    concurrency = [1, 4, 16]
    slo = "e2e_p99=5s,error_rate=1%"
    [serve]
    max_batch = 64
    cuda_graphs = true

    TTSPERF_BENCH_REQUESTS=500 ttsperf bench http://127.0.0.1:8080 --settings ttsperf.toml --warmup 10

A list is `[1, 4, 16]` in a file and `1,4,16` in a flag or a variable (a JSON list works there too;
a repeatable flag's variable takes one value, or a JSON list for several).
"""

from __future__ import annotations

import json
import os
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from ttsperf.errors import UserError
from ttsperf.slo import duration

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

COMMANDS = ("bench", "serve", "plan", "profile")  # the tables a shared settings file may hold


@dataclass(frozen=True)
class Flag:
    """How a setting appears on the command line where it is not `--field-name` taking its type."""

    decls: tuple[str, ...] = ()  # its names, e.g. ("-o", "--out") or ("--inference-mode/--no-grad",)
    repeat: bool = False  # a list given by repeating the flag (a string from a variable is one item)
    argument: bool = False  # positional, e.g. bench's URLs
    cli_type: type | None = None  # what the command line takes when not the field's type (auto or N)
    secret: bool = False  # its value is never printed, not even in an error (SecretStr fields neither)
    seconds: bool = False  # a duration: given with a unit (300ms, 2s), as --slo is; held as seconds


SECONDS = Flag(seconds=True)  # a duration field: Annotated[float, SECONDS]


def at_most(flag: str, values: Any, most: float, what: str, unit: str = "") -> None:
    """A count, rate or duration past what the command can do: one line naming the flag, its bound
    and the reason for it (`what`: e.g. "requests in flight (one client's sockets)"; a duration's
    `unit` is "s", written after each number)."""
    for v in values if isinstance(values, list) else [values]:
        if v is not None and not v <= most:
            raise UserError(f"{flag} {v:.10g}{unit}: expected at most {most:,.10g}{unit} {what}")


def flag_of(field: FieldInfo) -> Flag:
    return next((m for m in field.metadata if isinstance(m, Flag)), Flag())


def flag_name(name: str, field: FieldInfo) -> str:
    """The name a user types for this setting: its first long flag."""
    flag = flag_of(field)
    if flag.argument:
        return name.upper()
    longs = [d for decl in flag.decls for d in decl.split("/") if d.startswith("--")]
    return longs[0] if longs else "--" + name.replace("_", "-")


def names_that_differ(model: type[Layered]) -> list[tuple[str, str]]:
    """(what the user types, the setting's name) wherever the two are not `--NAME` and `NAME`: the
    README lists these, and a test holds the list to the models."""
    return [
        (flag_name(name, field), name)
        for name, field in model.model_fields.items()
        if flag_name(name, field) != "--" + name.replace("_", "-")
    ]


def bare_type(annotation: Any) -> Any:
    """`int | None` -> int; other annotations as they are."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(bare_type(annotation)) is list


def _optional(annotation: Any) -> bool:
    return type(None) in typing.get_args(annotation)


def _expected(annotation: Any) -> str:
    """What a value of this type looks like, for an error message."""
    kind = bare_type(annotation)
    if _is_list(kind):
        item = (typing.get_args(kind) or (str,))[0]
        return {
            int: "integers separated by commas, e.g. 1,4,16",
            float: "numbers separated by commas, e.g. 2,4.5",
        }.get(item, "values separated by commas")
    names = {int: "an integer", float: "a number", bool: "true or false", str: "text", SecretStr: "text"}
    return names.get(kind, "a path" if kind is Path else getattr(kind, "__name__", str(kind)))


class Layered(BaseSettings):
    """A command's settings. Built in code (`BenchSettings(urls=[...])`) it reads nothing but its
    arguments; `resolve()` lays the file, the environment and the flags over the defaults."""

    model_config = SettingsConfigDict(extra="forbid", enable_decoding=False, case_sensitive=False)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):  # fmt: skip
        # the layers are resolve()'s, each recorded; nothing is read behind a caller's back
        return (init_settings,)

    @classmethod
    def command(cls) -> str:
        """`bench` for TTSPERF_BENCH_: the command, its table in a settings file, its variables."""
        return cls.model_config["env_prefix"].removeprefix("TTSPERF_").strip("_").lower()

    @field_validator("*", mode="before")
    @classmethod
    def _from_outside(cls, value: Any, info: ValidationInfo) -> Any:
        """Flags and variables are text: `1,4,16` is a list, `none` an absent number; a file's lone
        value where a list goes is a list of one."""
        field = cls.model_fields[info.field_name]
        if _is_list(field.annotation):
            if value is None:
                return []
            if not isinstance(value, str):
                return value if isinstance(value, list | tuple) else [value]
            if value.lstrip().startswith("["):
                try:
                    return json.loads(value)
                except json.JSONDecodeError:
                    return value  # pydantic says it is not a list
            if flag_of(field).repeat:
                return [value]
            return [v.strip() for v in value.split(",") if v.strip()]
        absent = isinstance(value, str) and value.strip().lower() in ("", "none", "null")
        if flag_of(field).seconds and isinstance(value, str) and not absent:
            return duration(value)  # its ValueError says what a duration looks like
        if absent and _optional(field.annotation) and bare_type(field.annotation) in (int, float, bool, Path):
            return None
        return value

    @classmethod
    def resolve(
        cls, flags: Mapping[str, Any] | None = None, file: str | Path | None = None
    ) -> tuple[Any, dict[str, str]]:
        """The settings from defaults < `file` < TTSPERF_<COMMAND>_* < `flags` (field name -> value,
        only those given), and where each came from: default | file | env | flag."""
        layers = (("file", _read_file(cls, Path(file)) if file else {}), ("env", _read_env(cls)),
                  ("flag", dict(flags or {})))  # fmt: skip
        values: dict[str, Any] = {}
        source: dict[str, str] = {}
        for where, layer in layers:
            for name, value in layer.items():
                values[name], source[name] = value, where
        try:
            settings = cls(**values)
        except ValidationError as exc:
            raise UserError(_explain(cls, exc, values, source, file)) from None
        return settings, {name: source.get(name, "default") for name in cls.model_fields}

    @classmethod
    def build(cls, **values: Any) -> Any:
        """Settings from a library call, with no layers: a bad value is a UserError naming its flag."""
        try:
            return cls(**values)
        except ValidationError as exc:
            raise UserError(_explain(cls, exc, values, {}, None)) from None


def _place(cls: type[Layered], name: str, value: Any, where: str, file: str | Path | None) -> str:
    """The value as the user wrote it: `--requests 'x'`, `TTSPERF_BENCH_REQUESTS='x'`, a file's key."""
    field = cls.model_fields[name]
    if flag_of(field).secret or bare_type(field.annotation) is SecretStr:
        value = "<hidden>"
    if where == "env":
        return f"{cls.model_config['env_prefix']}{name.upper()}={value!r}"
    if where == "file":
        return f"--settings {file}: {name} = {value!r}"
    return f"{flag_name(name, cls.model_fields[name])} {value!r}"


def _explain(cls: type[Layered], exc: ValidationError, values: dict, source: dict, file) -> str:
    """The first bad value, named where the user wrote it, and what was expected."""
    err = exc.errors()[0]
    name = str(err["loc"][0]) if err["loc"] else ""
    if name not in cls.model_fields:
        return (
            f"{cls.command()} settings: {name}: {err['msg']}; expected one of {', '.join(cls.model_fields)}"
        )
    place = _place(cls, name, values.get(name), source.get(name, "default"), file)
    if err["type"] == "value_error":  # a field's own validator: its message says what it expects
        return f"{place}: {err['ctx']['error']}"
    msg = err["msg"][:1].lower() + err["msg"][1:]
    return f"{place}: expected {_expected(cls.model_fields[name].annotation)} ({msg})"


def _read_env(cls: type[Layered]) -> dict[str, Any]:
    """TTSPERF_<COMMAND>_* through pydantic-settings; a variable that names no setting is an error
    (a typo would otherwise be ignored without a word)."""
    prefix = cls.model_config["env_prefix"]
    for key in os.environ:
        name = key[len(prefix) :].lower()
        if key.upper().startswith(prefix) and name not in cls.model_fields:
            raise UserError(
                f"{key}: unknown setting; expected {prefix}<one of {', '.join(cls.model_fields)}>"
            )
    return EnvSettingsSource(cls)()


def _read_file(cls: type[Layered], path: Path) -> dict[str, Any]:
    """A .toml or .json file: its table for this command if it has tables per command, else the top."""
    where = f"--settings {path}"
    if path.suffix.lower() not in (".toml", ".json"):
        raise UserError(f"{where}: expected a .toml or .json file")
    if not path.is_file():
        raise UserError(f"{where}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot read ({exc.__class__.__name__}: {exc})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not JSON ({exc.msg}, line {exc.lineno})") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{where}: not TOML ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a table of settings at the top, found {type(data).__name__}")
    # one file for several commands: this command's table, the others' left to them
    tables = [k for k, v in data.items() if k in COMMANDS and isinstance(v, dict)]
    if tables:
        loose = [k for k in data if k not in tables]
        if loose:
            raise UserError(
                f"{where}: {loose[0]!r} sits beside the tables {', '.join(tables)}; "
                f"put it in [{cls.command()}] or another command's table"
            )
        data = data.get(cls.command(), {})
        where = f"{where} [{cls.command()}]"
    data = {str(k).replace("-", "_").lower(): v for k, v in data.items()}
    for key, value in data.items():
        if key not in cls.model_fields:
            raise UserError(
                f"{where}: unknown setting {key!r}; expected one of {', '.join(cls.model_fields)}"
            )
        if flag_of(cls.model_fields[key]).seconds and isinstance(value, int | float):
            raise UserError(f'{where}: {key} = {value!r}: expected a duration with a unit, e.g. "{value}s"')
    return data
