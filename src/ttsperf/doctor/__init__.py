"""`ttsperf doctor`: the guide's pitfalls and ChatTTS's traps, checked on this machine and deployment.

from ttsperf.doctor import diagnose
report = diagnose(urls=["http://127.0.0.1:8080"], trt_shapes="--minShapes=... ...")
report["exit_code"]   # 0 no error finding, 1 some error finding
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ttsperf.doctor.checks import SEVERITIES, Finding, run_checks
from ttsperf.doctor.facts import Facts, collect

SCHEMA = "ttsperf.doctor"
VERSION = 1
DEFAULT_MAX_BATCH = 8  # the guide's trtexec example (--maxShapes=input_ids:8x50)


def diagnose(
    *,
    urls: list[str] | None = None,
    profiles: list[Path] | None = None,
    trt_shapes: str | None = None,
    texts: str | None = None,
    text_set: str | None = None,
    assets: str | None = None,
    config: str | None = None,
    max_batch: int | None = None,
    probe: bool = False,
    facts: Facts | None = None,
) -> dict:
    """Collect facts (unless given), run every check, return the report (the `--json` document).
    The TensorRT shapes are for `config` if given, else for the model a --url server says it runs,
    else for chattts."""
    from ttsperf.bench.texts import load_workload
    from ttsperf.doctor.trt import check_trt
    from ttsperf.export.shapes import PRECISION_FLAGS, load_requests, parse_spec
    from ttsperf.model.config import CONFIGS, get_config

    # bad input (a config, a spec, a texts file) fails before any work: no server is asked first
    if config is not None:
        get_config(config)
    spec = parse_spec(trt_shapes) if trt_shapes is not None else None
    load_workload(texts, text_set or "mixed")
    facts = facts or collect(urls, profiles, probe)
    served = next((d.model for d in facts.deployments if d.model in CONFIGS), None)
    if config is not None:
        model_from = "--config"
    else:
        config, model_from = (served, "the server's") if served else ("chattts", "default")
    g = get_config(config).gpt
    workload, requests = load_requests(texts, text_set, g, assets)
    findings: list[Finding] = run_checks(facts)
    if max_batch is not None:
        batch, batch_from = max_batch, "--max-batch"
    else:
        served = [d.max_batch for d in facts.deployments if d.max_batch]
        batch, batch_from = (
            (max(served), "the server's max_batch") if served else (DEFAULT_MAX_BATCH, "default")
        )
    # the engine runs in the deployment's dtype (a server's, a profile's, or serve's default here)
    dtype = next((d.dtype for d in facts.deployments if d.dtype in PRECISION_FLAGS), "fp32")
    where = f"{workload} ({config} model, {model_from})"
    findings += check_trt(spec, requests, where, g, batch, batch_from, dtype)
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "exit_code": 1 if counts["error"] else 0,
        "summary": counts,
        "findings": [f.to_dict() for f in findings],
        "facts": asdict(facts),
    }
