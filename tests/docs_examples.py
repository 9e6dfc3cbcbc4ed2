"""Every command the docs show, collected where it is written: each command's `--help` (walked from
the typer app, so a new command or example is found without a list to keep) and the README (its
command table and every code block). tests/test_docs_run.py runs them; `python -m
tests.docs_examples` prints them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
_COMMAND = re.compile(r"^(?:[A-Z_0-9]+=\S+\s+)*ttsperf\s")


@dataclass(frozen=True)
class Example:
    where: str  # "README" or "ttsperf bench --help"
    command: str  # as a shell takes it: continuations joined, the trailing comment and `&` gone

    @property
    def words(self) -> list[str]:
        import shlex

        return shlex.split(self.command)

    @property
    def subcommand(self) -> str:
        """`bench`, `export onnx`, `serve --ray`, `profile --host`: what the example runs."""
        words = [w for w in self.words if "=" not in w or w.startswith("-")]
        rest = words[words.index("ttsperf") + 1 :]
        name = rest[0] if rest else ""
        if name in ("export", "assets") and len(rest) > 1:
            name += " " + rest[1]
        flag = {"serve": "--ray", "profile": "--host"}.get(name)  # a run of its own (tests/test_docs_run)
        return name + (f" {flag}" if flag in rest else "")


def _clean(line: str) -> str:
    line = line.strip().removeprefix("$ ")
    line = re.sub(r"\s+#\s.*$", "", line)  # a trailing comment (never inside an example's quotes here)
    return " ".join(line.removesuffix("&").split())


def help_examples() -> list[Example]:
    """The `ttsperf ...` lines of every command's help, sub-commands included."""
    import typer

    from ttsperf.cli.main import app

    out: list[Example] = []

    def walk(cmd, path: list[str]) -> None:
        text = (cmd.help or "").replace("\\\n", " ")
        for line in text.splitlines():
            line = re.sub(r"^\s*Examples?:\s*", "", line)
            if _COMMAND.match(line.strip()):
                out.append(Example(" ".join(["ttsperf", *path, "--help"]), _clean(line)))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


def readme_examples() -> list[Example]:
    text = README.read_text(encoding="utf-8")
    out = [
        Example("README table", c)
        for c in re.findall(r"^\| `[a-z][a-z -]*` \| `(ttsperf [^`]+)`", text, re.M)
    ]
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S):
        lines = block.replace("\\\n", " ").splitlines()
        if any(ln.startswith("$ ") for ln in lines):  # a transcript: its other lines are output
            lines = [ln for ln in lines if ln.startswith("$ ")]
        for line in lines:
            line = _clean(line)
            if _COMMAND.match(line):
                out.append(Example("README", line))
    return out


def all_examples() -> list[Example]:
    """Each distinct command once (the README and a --help often show the same one)."""
    seen: dict[str, Example] = {}
    for ex in readme_examples() + help_examples():
        seen.setdefault(ex.command, ex)
    return list(seen.values())


if __name__ == "__main__":
    for ex in all_examples():
        print(f"{ex.where:<28} {ex.command}")
