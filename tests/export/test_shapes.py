"""TensorRT shape specs: parsing (and its errors), requests outside a spec, shapes from a workload."""

from __future__ import annotations

import pytest

from ttsperf.errors import UserError
from ttsperf.export.shapes import (
    RequestShape,
    check_spec,
    length_stats,
    load_requests,
    parse_spec,
    recommend,
)
from ttsperf.model.config import CHATTTS, TINY

GUIDE = "--minShapes=input_ids:1x1 --optShapes=input_ids:4x20 --maxShapes=input_ids:8x50"


def test_parses_the_guides_flags_in_either_form():
    spec = parse_spec(GUIDE)
    assert spec.inputs == {"input_ids": ((1, 1), (4, 20), (8, 50))}
    assert spec.flags() == GUIDE
    spaced = parse_spec("--minShapes 'codes':1x4,positions:1 --optShapes codes:2x4,positions:2 "
                        "--maxShapes codes:8x4,positions:8")  # fmt: skip
    assert spec.inputs and spaced.inputs["positions"] == ((1,), (2,), (8,))


@pytest.mark.parametrize(
    "text,names",
    [
        ("--minShapes=input_ids:1x1 --optShapes=input_ids:4x20", "--maxShapes is missing"),
        ("--minShapes=input_ids:1xa --optShapes=input_ids:4x20 --maxShapes=input_ids:8x50", "dimension 'a'"),
        ("--minShapes=input_ids:0x1 --optShapes=input_ids:4x20 --maxShapes=input_ids:8x50", "dimension '0'"),
        (
            "--minShapes=input_ids --optShapes=input_ids:4x20 --maxShapes=input_ids:8x50",
            "'input_ids': expected NAME:DIMS",
        ),
        (
            "--minShapes=input_ids:1x1 --optShapes=input_ids:4x60 --maxShapes=input_ids:8x50",
            "min 1, opt 60, max 50",
        ),
        ("--minShapes=input_ids:1x1 --optShapes=input_ids:4 --maxShapes=input_ids:8x50", "2/1/2 dimensions"),
        ("--minShapes=a:1 --optShapes=b:1 --maxShapes=a:1", "a, b not in all three"),
        ("--minShapes=a:1 --minShapes=a:1 --optShapes=a:1 --maxShapes=a:1", "--minShapes given twice"),
        ("--shapes=input_ids:1x1", "unexpected '--shapes=input_ids:1x1'"),
        ("--minShapes='input_ids:1x1", "No closing quotation"),
        ("", "--minShapes is missing"),
    ],
)
def test_a_spec_that_does_not_parse_names_the_bad_part_and_the_form(text, names):
    with pytest.raises(UserError) as exc:
        parse_spec(text)
    msg = str(exc.value)
    assert msg.startswith("--trt-shapes") and names in msg and "\n" not in msg
    assert "expected" in msg


def req(prompt: int, steps: int, text: str = "t") -> RequestShape:
    return RequestShape(text, prompt, steps)


def test_the_guides_pitfall_a_12_token_text_outside_a_9_token_engine():
    spec = parse_spec("--minShapes=input_ids:1x9 --optShapes=input_ids:1x9 --maxShapes=input_ids:1x9")
    check = check_spec(spec, [req(9, 50, "fits"), req(12, 80, "twelve")], CHATTTS.gpt)
    assert [(r.text, why) for r, why in check.outside] == [("twelve", ["input_ids prompt 12 outside 9..9"])]


def test_decode_context_covers_every_step_of_a_request():
    spec = parse_spec(
        "--minShapes=past_keys:20x1x12x1x64 --optShapes=past_keys:20x4x12x64x64 "
        "--maxShapes=past_keys:20x8x12x100x64"
    )
    check = check_spec(spec, [req(20, 80), req(20, 81)], CHATTTS.gpt)
    # contexts run from prompt + 1 to prompt + steps: 21..100 fits, 21..101 does not
    assert [r.steps for r, _ in check.outside] == [81]
    assert not check.problems and "past_keys dim 3 (context): 1..100" in check.checked


def test_fixed_dimensions_and_batch_limits_are_problems_for_every_request():
    spec = parse_spec(
        "--minShapes=past_keys:16x2x12x1x64 --optShapes=past_keys:16x4x12x8x64 "
        "--maxShapes=past_keys:16x4x12x9x64"
    )
    check = check_spec(spec, [req(3, 3)], CHATTTS.gpt, max_batch=8)
    assert any("(layers) allows 16..16, the model has 20" in p for p in check.problems)
    assert any("a lone request (batch 1) fails" in p for p in check.problems)
    assert any("ends at 4, the server batches up to 8" in p for p in check.problems)


def test_inputs_it_cannot_interpret_are_named_not_guessed():
    spec = parse_spec("--minShapes=x:1x1 --optShapes=x:1x1 --maxShapes=x:1x1")
    check = check_spec(spec, [req(3, 3)], CHATTTS.gpt)
    assert check.unknown == ["x (2 dims)"] and not check.outside


def test_recommended_shapes_cover_every_request_of_the_workload():
    name, requests = load_requests(None, "mixed", TINY.gpt)
    assert "synthetic tokenizer" in name and len(requests) == 24
    for inputs in (None, {"input_ids": 2}, {"input_ids": 3}):
        spec = recommend(requests, CHATTTS.gpt, max_batch=8, inputs=inputs)
        check = check_spec(spec, requests, CHATTTS.gpt, max_batch=8)
        assert not check.outside and not check.problems and not check.unknown


def test_recommendation_is_min_1_opt_median_max_longest_rounded():
    requests = [req(10, 10), req(20, 10), req(30, 10)]
    stats = length_stats(requests)
    assert stats["prompt"] == {"min": 10, "p50": 20, "p90": 28, "p99": 30, "max": 30}
    spec = recommend(requests, CHATTTS.gpt, max_batch=8, inputs={"input_ids": 2})
    assert spec.inputs["input_ids"] == ((1, 1), (4, 20), (8, 32))
    step = recommend(requests, CHATTTS.gpt, max_batch=8)
    lo, opt, hi = step.inputs["past_keys"]
    assert (
        lo == (20, 1, 12, 1, 64)
        and opt == (20, 4, 12, stats["context"]["p50"], 64)
        and hi == (20, 8, 12, 48, 64)
    )


def test_recommended_context_never_exceeds_the_models_positions():
    step = recommend([req(500, 2048)], TINY.gpt, max_batch=2)
    assert step.inputs["past_keys"][2][3] == TINY.gpt.max_position_embeddings


@pytest.mark.parametrize("dtype, flag", [("fp16", " --fp16"), ("bf16", " --bf16"), ("fp32", "")])
def test_the_trtexec_command_carries_the_precision_of_its_dtype(dtype, flag):
    from ttsperf.export.shapes import trtexec_command

    spec = parse_spec("--minShapes=codes:1x4 --optShapes=codes:2x4 --maxShapes=codes:4x4")
    cmd = trtexec_command("m.onnx", spec, dtype, engine="m.plan")
    assert cmd == f"trtexec --onnx=m.onnx {spec.flags()}{flag} --saveEngine=m.plan"


def test_a_dtype_trtexec_cannot_take_is_one_line():
    from ttsperf.export.shapes import trtexec_command

    spec = parse_spec("--minShapes=codes:1x4 --optShapes=codes:2x4 --maxShapes=codes:4x4")
    with pytest.raises(UserError, match="--dtype 'int4': expected one of fp32, fp16, bf16"):
        trtexec_command("m.onnx", spec, "int4")
