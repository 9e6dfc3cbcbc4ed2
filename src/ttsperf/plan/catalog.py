"""GPU and price catalogs: data files with a source per row, validated on load.

Every problem with a file is a UserError naming the file, the line, the field, what was expected
and what was found, so a user can fix the row without reading code.
"""

from __future__ import annotations

import csv
import difflib
import io
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ttsperf.errors import UserError

SHIPPED_GPUS = "gpus.csv"
SHIPPED_PRICES = "prices.csv"

# Column -> (required?, kind). Blank optional numbers mean "not published / not supported"
# (e.g. T4 has no bf16).
GPU_COLUMNS: dict[str, tuple[bool, str]] = {
    "name": (True, "text"),
    "vendor": (False, "text"),
    "memory_gb": (True, "positive"),
    "mem_bandwidth_gbs": (True, "positive"),
    "fp16_dense_tflops": (True, "positive"),
    "bf16_dense_tflops": (False, "positive"),
    "fp32_tflops": (True, "positive"),
    "int8_dense_tops": (False, "positive"),
    "tdp_w": (False, "positive"),
    "interconnect": (False, "text"),
    "source": (True, "text"),
}
# A user's own price file needs only the first three; the shipped one carries them all.
PRICE_COLUMNS: dict[str, tuple[bool, str]] = {
    "gpu": (True, "text"),
    "usd_per_gpu_hour": (True, "positive"),
    "source": (True, "text"),
    "provider": (False, "text"),
    "sku": (False, "text"),
    "gpus_per_instance": (False, "positive"),
    "usd_per_instance_hour": (False, "positive"),
    "region": (False, "text"),
    "tier": (False, "text"),
    "read_on": (False, "text"),
}


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: float  # vendor "GB" of VRAM: binary (GiB) in practice, see memory.py
    bandwidth_gbs: float
    tflops: dict[str, float | None]  # dtype -> dense peak; None = unsupported
    tdp_w: float | None
    source: str
    vendor: str = ""


@dataclass(frozen=True)
class Price:
    gpu: str
    usd_per_gpu_hour: float
    source: str
    provider: str = ""
    sku: str = ""
    tier: str = ""
    read_on: str = ""

    def label(self) -> str:
        where = " ".join(x for x in (self.provider, self.sku, self.tier) if x)
        when = f", read {self.read_on}" if self.read_on else ""
        return f"{where or 'user'}{when}: {self.source}"


@dataclass
class Catalog:
    gpus: dict[str, Gpu]
    gpus_file: str
    prices: dict[str, Price] = field(default_factory=dict)  # cheapest per card
    prices_file: str = ""
    known: list[str] = field(default_factory=list)  # every card in the file, before --gpus


def resolve_name(name: str, known: list[str], where: str) -> str:
    """A user-typed card name -> the catalog's name (exact, case-insensitive, or a unique part).

    Spaces do not count in the exact match: "RTX 4090D" is NVIDIA's "RTX 4090 D".
    """
    wanted = " ".join(name.split()).lower()
    by_squashed = {k.lower().replace(" ", ""): k for k in known}
    if wanted.replace(" ", "") in by_squashed:
        return by_squashed[wanted.replace(" ", "")]
    partial = [k for k in known if wanted and wanted in k.lower()]
    if len(partial) == 1:
        return partial[0]
    if len(partial) > 1:
        raise UserError(f"{where}: {name!r} is ambiguous: it matches {', '.join(partial)}; name one")
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.4)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UserError(f"{where}: unknown GPU {name!r}{hint}; known: {', '.join(known)}")


def read_rows(path: Path | None, shipped: str, columns: dict[str, tuple[bool, str]]):
    """(label, [(label, line, row as parsed dict)]) after checking the header and every field."""
    if path is None:
        label = f"ttsperf/data/{shipped}"
        text = resources.files("ttsperf.data").joinpath(shipped).read_text(encoding="utf-8")
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
        raise UserError(
            f"{label}: header: missing column(s) {', '.join(missing)}; "
            f"found: {', '.join(header) or 'nothing'}"
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


def load_gpus(path: Path | None = None) -> tuple[str, dict[str, Gpu]]:
    label, rows = read_rows(path, SHIPPED_GPUS, GPU_COLUMNS)
    gpus: dict[str, Gpu] = {}
    for _, line, r in rows:
        name = str(r["name"])
        if name in gpus:
            raise UserError(
                f"{label}: line {line}: field 'name': expected a unique name, found {name!r} again"
            )
        gpus[name] = Gpu(
            name=name,
            memory_gb=float(r["memory_gb"]),  # type: ignore[arg-type]
            bandwidth_gbs=float(r["mem_bandwidth_gbs"]),  # type: ignore[arg-type]
            tflops={
                "fp16": r["fp16_dense_tflops"],  # type: ignore[dict-item]
                "bf16": r["bf16_dense_tflops"],  # type: ignore[dict-item]
                "fp32": r["fp32_tflops"],  # type: ignore[dict-item]
            },
            tdp_w=r["tdp_w"],  # type: ignore[arg-type]
            source=str(r["source"]),
            vendor=str(r["vendor"]),
        )
    return label, gpus


def load_prices(known: list[str], path: Path | None = None) -> tuple[str, dict[str, Price]]:
    """The cheapest per-GPU hourly price for each card the file names.

    A user's file must name catalog cards; the shipped file may price cards a user's own
    catalog (--catalog) does not have, and those rows are skipped.
    """
    label, rows = read_rows(path, SHIPPED_PRICES, PRICE_COLUMNS)
    best: dict[str, Price] = {}
    for _, line, r in rows:
        if path is None and not any(str(r["gpu"]).lower() == k.lower() for k in known):
            continue
        gpu = resolve_name(str(r["gpu"]), known, f"{label}: line {line}: field 'gpu'")
        per_gpu = float(r["usd_per_gpu_hour"])  # type: ignore[arg-type]
        n, per_inst = r["gpus_per_instance"], r["usd_per_instance_hour"]
        if n and per_inst and abs(per_inst / n - per_gpu) > 0.01 * per_gpu + 0.001:  # type: ignore[operator]
            raise UserError(
                f"{label}: line {line}: field 'usd_per_gpu_hour': expected usd_per_instance_hour / "
                f"gpus_per_instance = {per_inst / n:.4f}, found {per_gpu}"  # type: ignore[operator]
            )
        price = Price(
            gpu=gpu,
            usd_per_gpu_hour=per_gpu,
            source=str(r["source"]),
            provider=str(r["provider"]),
            sku=str(r["sku"]),
            tier=str(r["tier"]),
            read_on=str(r["read_on"]),
        )
        if gpu not in best or per_gpu < best[gpu].usd_per_gpu_hour:
            best[gpu] = price
    return label, best


def parse_price_flag(text: str, known: list[str]) -> Price:
    """`--price "RTX 4090=0.5"` -> a user-supplied price (USD per GPU-hour)."""
    name, sep, value = text.rpartition("=")
    if not sep or not name.strip():
        raise UserError(f'--price: expected NAME=USD_PER_GPU_HOUR (e.g. "RTX 4090=0.5"), found {text!r}')
    gpu = resolve_name(name.strip(), known, "--price")
    usd = parse_positive(value.strip(), f"--price {text!r}: USD per GPU-hour")
    return Price(gpu=gpu, usd_per_gpu_hour=usd, source="user --price flag", provider="user")


def load_catalog(
    catalog: Path | None = None,
    prices: Path | None = None,
    price_flags: list[str] | None = None,
    only: list[str] | None = None,
    others: list[str] | None = None,
) -> Catalog:
    """GPUs (optionally only the named ones, in the order given) with the cheapest known price each.

    `--prices FILE` merges over the shipped price list (e.g. your Alibaba Cloud rates): a card
    it prices takes its price, the others keep the shipped one; `--price NAME=USD` then
    overrides single cards. `others`: the rows of profiled devices outside the catalog (this
    CPU), which --price may name too.
    """
    gpus_label, gpus = load_gpus(catalog)
    known = list(gpus)
    prices_label, best = load_prices(known)
    if prices is not None:
        user_label, user = load_prices(known, prices)
        best.update(user)
        prices_label += f" with {user_label} over it ({len(user)} card(s) priced from it)"
    for flag in price_flags or []:
        price = parse_price_flag(flag, known + [o for o in others or [] if o not in known])
        best[price.gpu] = price
        prices_label += f" + --price {flag!r}"
    if only:
        chosen = [resolve_name(n, known, "--gpus") for n in only]
        gpus = {n: gpus[n] for n in dict.fromkeys(chosen)}
    return Catalog(gpus=gpus, gpus_file=gpus_label, prices=best, prices_file=prices_label, known=known)


def split_names(text: str) -> list[str]:
    """`"T4,RTX 3090, A100 40GB PCIe"` -> names (a comma separates; spaces belong to names)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError(f"--gpus: expected comma-separated GPU names, found {text!r}")
    return names
