"""The plan's data files: the shipped folder and a CSV reader that checks every row.

What the GPU and price catalogs (catalog.py), the exchange rates (money.py) and the purchase
prices (cost.py) share. Every problem with a file is a UserError naming the file, the line, the
field, what was expected and what was found, so a user can fix the row without reading code.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from pathlib import Path

from ttsperf.errors import UserError


def data_files():
    """The shipped data folder (a function, so a test can point it at fixtures)."""
    return resources.files("ttsperf.data")


def read_rows(
    path: Path | None,
    shipped: str,
    columns: dict[str, tuple[bool, str]],
    renamed: dict[str, str] | None = None,
):
    """(label, [(label, line, row as parsed dict)]) after checking the header and every field."""
    if path is None:
        label = f"ttsperf/data/{shipped}"
        text = data_files().joinpath(shipped).read_text(encoding="utf-8")
    else:
        label = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{label}: cannot read: {exc.strerror or exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c, (req, _) in columns.items() if req and c not in header]
    if missing:
        old = [f"{o} is now {n} with a currency column" for o, n in (renamed or {}).items() if o in header]
        raise UserError(
            f"{label}: header: missing column(s) {', '.join(missing)}; "
            f"found: {', '.join(header) or 'nothing'}" + (f" ({'; '.join(old)})" if old else "")
        )
    rows = []
    for row in reader:
        line = reader.line_num
        parsed: dict[str, object] = {}
        for col, (required, kind) in columns.items():
            raw = (row.get(col) or "").strip()
            if not raw:
                if required:
                    raise UserError(f"{label}: line {line}: field {col!r}: expected a value, found nothing")
                parsed[col] = None if kind == "positive" else ""
                continue
            if kind == "positive":
                parsed[col] = parse_positive(raw, f"{label}: line {line}: field {col!r}")
            else:
                parsed[col] = raw
        rows.append((label, line, parsed))
    if not rows:
        raise UserError(f"{label}: expected at least one data row, found none")
    return label, rows


def parse_positive(raw: str, where: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{where}: expected a positive number, found {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise UserError(f"{where}: expected a positive number, found {raw!r}")
    return value
