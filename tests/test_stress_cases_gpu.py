"""The Verifier's softmax stress cases on a real GPU (issue 23): a kernel that is right on the
problem's own N(0, 1) inputs but overflows on large logits, or gives a fully masked row weights
instead of PyTorch's NaN, is rejected on that case; the honest kernel passes every case."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier import VerifyOptions, verify

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CANDIDATES = Path(__file__).parent / "candidates"
REF = CANDIDATES / "ref_masked_softmax.py"
OPTIONS = VerifyOptions(seeds=2, shape_variants=1, timing=False, compare_compile=False,
                        timeout_s=300)


def _failed_cases(verdict) -> set[str]:
    return {c.name.split(":")[-1] for c in verdict.checks if not c.passed}


def test_the_honest_masked_softmax_passes_every_stress_case():
    verdict = verify(REF, CANDIDATES / "honest_masked_softmax.py", options=OPTIONS)
    assert verdict.status == "accepted", verdict.reasons
    checked = {c.name.split(":")[-1] for c in verdict.checks}
    for case in ("large_logits", "masked_rows"):  # both ran, on the candidate's main checks
        assert any(name.endswith(case) for name in checked), (case, checked)


# The sentinel kernel's uniform weights on a fully masked row, where PyTorch gives NaN, were
# accepted on an H100 (2026-11-27, call B) through the float64 second opinion, which measured
# errors at finite positions only: it now requires float64's NaN / Inf of the candidate too.
@pytest.mark.parametrize("candidate, case", [("naive_masked_softmax.py", "large_logits"),
                                             ("sentinel_masked_softmax.py", "masked_rows")])
def test_a_kernel_right_only_on_normal_inputs_is_rejected_on_its_stress_case(candidate, case):
    verdict = verify(REF, CANDIDATES / candidate, options=OPTIONS)
    assert verdict.status == "rejected" and verdict.codes() == ["nan_or_inf"], verdict.reasons
    failed = _failed_cases(verdict)
    assert failed and all(name.endswith(case) for name in failed), failed
