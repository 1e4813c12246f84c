"""The gn-stats variant's programs on a GPU (tests/test_group_norm_stats.py's modules): built,
then verified end to end like any candidate (the statistics kernel's group form reading the conv
output as it lies, the normalization in the reduction's prologue)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from test_group_norm_stats import CASES, _write  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("name", CASES)
def test_the_gn_stats_variant_is_accepted_by_the_verifier(name, tmp_path):
    from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
    from kernelstitch.agents.planner.capture import capture
    from kernelstitch.agents.planner.variants import propose_variants
    from kernelstitch.agents.verifier import verify
    from kernelstitch.agents.verifier.declaration import CandidateOrigin
    from test_norms_gpu import QUICK

    path = _write(tmp_path, name)
    variants = {v.name: v for v in propose_variants(capture(path), None)}
    variant = variants["gn-stats"]
    out = tmp_path / "out"
    candidate = Path(write_candidate(code_builtin(variant.plan, path, out / "model_new.py"), out))
    verdict = verify(path, candidate, options=QUICK, origin=CandidateOrigin.BUILTIN)
    print(name, verdict.status, [(r.code, r.detail) for r in verdict.reasons])
    assert verdict.status == "accepted", verdict.reasons
