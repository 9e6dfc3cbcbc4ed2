"""What the server under test says it runs, read once before the load: `GET /healthz`.

`ttsperf serve` answers /healthz with its version, its engine's config, batch and queue limits,
runtime switches (each {value, applied, note}), device and model. bench keeps the settings that
decide what was measured - the engine mode as plan names it, dtype, max batch, queue, first
chunk - so that `plan --predict --like RUN` predicts the server that ran, not plan's defaults.

Best effort: one request with a short timeout, before the load (never during it), and never a
failed run. Another TTS server (no /healthz, or one without ttsperf's fields) records nothing,
with the reason in `BenchRun.server_note`. Read here as JSON over HTTP: bench imports nothing of
the server's code (the layers' contract in pyproject.toml).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ttsperf.bench.results import ServerSettings

TIMEOUT_S = 3.0  # a server that takes longer to say its settings is left unread
MAX_BODY = 1 << 20  # ttsperf's /healthz is a few kB


def healthz_url(target: str) -> str:
    """The target's /healthz: at its host's root, whatever path the target names."""
    parts = urlsplit(target)
    return urlunsplit((parts.scheme, parts.netloc, "/healthz", "", ""))


def read_server(
    target: str, headers: dict[str, str] | None = None, timeout: float = TIMEOUT_S
) -> tuple[ServerSettings | None, str]:
    """-> (the server's settings, "") from a ttsperf server, else (None, why not)."""
    url = healthz_url(target)
    request = urllib.request.Request(url, headers={"Accept": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            body = r.read(MAX_BODY)
    except urllib.error.HTTPError as exc:
        # a stopped engine answers 503 with the same JSON: its settings are still the server's
        body = exc.read(MAX_BODY) if exc.code == 503 else b""
        if not body:
            return None, f"{url} answered HTTP {exc.code}: not a ttsperf server, settings not recorded"
    except (OSError, ValueError) as exc:  # refused, timed out, reset, a bad URL
        reason = getattr(exc, "reason", None) or exc
        return None, f"{url}: no answer ({reason}), settings not recorded"
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, f"{url} is not JSON: not a ttsperf server, settings not recorded"
    settings = from_healthz(data, url)
    if settings is None:
        return None, f"{url} holds no engine settings (switches, config): not a ttsperf server"
    return settings, ""


def _switch(switches: dict, name: str) -> dict:
    value = switches.get(name)
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def from_healthz(data: Any, source: str) -> ServerSettings | None:
    """ttsperf serve's /healthz body -> its settings; None when it is not that shape."""
    if not isinstance(data, dict):
        return None
    switches, config = data.get("switches"), data.get("config")
    if not isinstance(switches, dict) or not isinstance(config, dict) or "max_batch" not in data:
        return None
    # the mode that ran: a switch asked for but not applied (CUDA graphs on a CPU) did not
    if _switch(switches, "cuda_graphs").get("applied"):
        mode = "cuda-graphs"
    elif _switch(switches, "compile").get("applied"):
        mode = "compile"
    else:
        mode = "eager"
    return ServerSettings(
        source=source,
        version=_str(data.get("version")),
        status=_str(data.get("status")),
        mode=mode,
        dtype=_str(_switch(switches, "dtype").get("value")),
        int8=bool(_switch(switches, "int8").get("applied")),
        max_batch=_int(data.get("max_batch")),
        max_queue=_int(data.get("max_queue")),
        engines=_int(data.get("engines")),
        first_chunk_steps=_int(config.get("first_chunk_steps")),
        steps_per_turn=_int(config.get("steps_per_turn")),
        chunk_steps=_int(config.get("chunk_steps")),
        max_new_tokens=_int(config.get("max_new_tokens")),
        device=_str(data.get("device")),
        model=_str(data.get("model")),
        weights=_str(data.get("weights")),
    )
