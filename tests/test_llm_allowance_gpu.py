"""The allowance on a real GPU (issue 21): an LLM-style candidate for conv2d_bias_relu that leaves
its convolution to PyTorch (as the built-in plan does) and fuses bias + relu + multiply-add in its
own kernel is accepted with the allowance the pipeline grants, and rejected without it (by the
static rule and the profiler's op trace); one that calls torch.relu too is rejected with it, by
both; a KERNELSTITCH_TORCH_OPS in the file adds nothing.

Like tests/test_verifier_gpu.py: set KS_VERDICT_DIR to keep every verdict as JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier import Verdict, VerifyOptions, verify
from llm_conv_scripts import CALLS_RELU, CONV, CONV_ALLOWANCE, DECLARES_RELU, HONEST

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

QUICK = VerifyOptions(seeds=2, shape_variants=0, timing=False, compare_compile=False,
                      timeout_s=300)


def _verify(tmp_path: Path, source: str, name: str, allowance=CONV_ALLOWANCE) -> Verdict:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    verdict = verify(CONV, path, options=QUICK, allowance=allowance)
    out = os.environ.get("KS_VERDICT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(verdict.to_json(), indent=1))
    print(name, verdict.status, [(r.code, r.line, r.detail.get("ops") or r.detail.get("op"))
                                 for r in verdict.reasons])
    return verdict


def _dynamic_ops(verdict: Verdict) -> set[str]:
    return {op for r in verdict.reasons if r.line is None and r.code == "reuses_reference_op"
            for op in r.detail.get("ops", [])}


def test_the_allowed_conv_is_accepted_only_with_the_allowance(tmp_path):
    allowed = _verify(tmp_path, HONEST, "llm_conv_allowed")
    assert allowed.status == "accepted", allowed.reasons
    assert allowed.torch_op_allowance == CONV_ALLOWANCE.to_json()
    bare = _verify(tmp_path, HONEST, "llm_conv_no_allowance", allowance=None)
    assert bare.status == "rejected" and set(bare.codes()) == {"reuses_reference_op"}
    assert "aten::conv2d" in _dynamic_ops(bare)  # the profiler's finding, not only the rule's


@pytest.mark.parametrize("source, name", [(CALLS_RELU, "llm_conv_calls_relu"),
                                          (DECLARES_RELU, "llm_conv_declares_relu")])
def test_an_op_outside_the_allowance_is_rejected_statically_and_dynamically(tmp_path, source,
                                                                            name):
    verdict = _verify(tmp_path, source, name)
    assert verdict.status == "rejected" and verdict.declared_torch_ops == {}
    static = [r for r in verdict.reasons if r.line is not None]
    assert [(r.code, r.detail["op"]) for r in static] == [("reuses_reference_op", "relu")]
    dynamic = _dynamic_ops(verdict)
    assert dynamic and all("conv" not in op for op in dynamic), dynamic  # relu, not the conv
