"""A command's options made from its settings model, so each setting is written once (ttsperf.settings).

    @settings_command(app, "bench", BenchSettings, help=EXAMPLES)
    def bench(settings: BenchSettings, sources: dict[str, str], out: Path = typer.Option(None, "-o")):
        ...

The command takes every field of the model as a flag (its help is the field's description), plus
`--settings FILE` and the body's own options (output, display: not settings). Only the flags the
user typed become the top layer; the file and the environment lie beneath them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from pydantic.fields import FieldInfo

from ttsperf.cli.common import user_errors
from ttsperf.errors import UserError
from ttsperf.settings import Flag, Layered, bare_type, flag_name, flag_of

_SETTINGS_FILE = "settings_file"


def _cli_type(field: FieldInfo, flag: Flag) -> Any:
    if flag.cli_type is not None:
        return flag.cli_type
    if flag.seconds:
        return str  # 300ms, 2s
    kind = bare_type(field.annotation)
    if getattr(kind, "__origin__", None) is list:
        return list[str] if (flag.repeat or flag.argument) else str  # comma-separated: the model splits it
    return kind if kind in (bool, int, float, str, Path) else str


def _cli_default(field: FieldInfo) -> Any:
    value = field.get_default(call_default_factory=True)
    if flag_of(field).seconds and value is not None:
        return f"{value:g}s"
    if isinstance(value, list):
        return ",".join(map(str, value)) or None
    return value


def _parameter(name: str, field: FieldInfo) -> inspect.Parameter:
    flag = flag_of(field)
    kind = _cli_type(field, flag)
    decls = flag.decls or ("--" + name.replace("_", "-"),)
    if flag.argument:
        default: Any = typer.Argument(None, help=field.description, show_default=False)
    elif kind is bool:  # always a pair, so a flag can undo what a file or a variable set
        on = next(d for d in decls if d.startswith("--"))
        pair = decls if any("/" in d for d in decls) else (f"{on}/--no-{on[2:]}",)
        default = typer.Option(field.default, *pair, help=field.description)
    elif flag.repeat:
        default = typer.Option(None, *decls, help=field.description)
    else:
        shown = _cli_default(field)
        default = typer.Option(shown, *decls, help=field.description, show_default=shown is not None)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)


def _from_cli(field: FieldInfo, value: Any) -> Any:
    """A typed flag's value as the field takes it: a path as text where the field is text."""
    if isinstance(value, Path) and bare_type(field.annotation) is not Path:
        return str(value)
    return value


def _with_origin(message: str, model: type[Layered], sources: dict[str, str], file: Path | None) -> str:
    """`--port 70000: expected ...` -> `... (set by TTSPERF_SERVE_PORT)` when the flag was not typed."""
    for name, where in sources.items():
        flag = flag_name(name, model.model_fields[name])
        if where in ("env", "file") and message.startswith((flag + " ", flag + ":")):
            origin = model.model_config["env_prefix"] + name.upper() if where == "env" else f"{file}: {name}"
            return f"{message} (set by {origin})"
    return message


def settings_command(
    app: typer.Typer, name: str, model: type[Layered], help: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `body(settings, sources, **own_options)` as `ttsperf NAME`."""
    fields = model.model_fields
    prefix = model.model_config["env_prefix"]
    layers = (
        f"\n\nEvery option is a setting: defaults < --settings FILE (TOML or JSON, its [{model.command()}] "
        f"table or its top) < {prefix}<OPTION> variables < flags."
    )

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        own = list(inspect.signature(body).parameters.values())[2:]  # after (settings, sources)
        clash = set(fields) & {p.name for p in own}
        assert not clash, f"{name}: {clash} is both a setting and a command option"
        params = [
            inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
            *(_parameter(n, f) for n, f in fields.items()),
            inspect.Parameter(
                _SETTINGS_FILE,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Path,
                default=typer.Option(None, "--settings", help=f"settings file (.toml/.json); env {prefix}*"),
            ),  # fmt: skip
            *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own),
        ]

        def command(ctx: typer.Context, **kw: Any) -> Any:
            flags = {}
            for n, f in fields.items():
                value = kw.pop(n)
                # compared by name: typer may ship its own copy of click's ParameterSource enum
                typed = getattr(ctx.get_parameter_source(n), "name", "") == "COMMANDLINE"
                if typed or (flag_of(f).argument and value):  # a variadic argument says DEFAULT when given
                    flags[n] = _from_cli(f, value)
            file = kw.pop(_SETTINGS_FILE)
            settings, sources = model.resolve(flags, file)
            try:
                return body(settings, sources, **kw)
            except UserError as exc:  # a check names the flag; say so when a variable or the file set it
                raise UserError(_with_origin(str(exc), model, sources, file)) from None

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__name__ = body.__name__
        command.__doc__ = body.__doc__
        app.command(name, help=(help or inspect.getdoc(body) or "") + layers)(user_errors(command))
        return body

    return decorate


def option(model: type[Layered], name: str) -> Any:
    """One field's typer option, for a command that takes it without the rest of the model."""
    return _parameter(name, model.model_fields[name]).default
