"""Verifier on a real GPU, issue 21: the indirect reference-op cheats are rejected by the static
rules and, on their own, by the dynamic op and kernel trace; a copied declaration excuses
nothing; the built-in coder's declaration counts only for the built-in origin.

Like tests/test_verifier_gpu.py: set KS_VERDICT_DIR to keep every verdict as JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier import Verdict, VerifyOptions, verify
from kernelstitch.agents.verifier.declaration import CandidateOrigin

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CANDIDATES = Path(__file__).parent / "candidates"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REF = CANDIDATES / "ref_scale_relu.py"
QUICK = VerifyOptions(seeds=2, shape_variants=0, timing=False, compare_compile=False,
                      timeout_s=300)


def _verify(reference: Path, candidate: Path, name: str,
            origin: CandidateOrigin = CandidateOrigin.UNTRUSTED) -> Verdict:
    verdict = verify(reference, candidate, options=QUICK, origin=origin)
    out = os.environ.get("KS_VERDICT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(verdict.to_json(), indent=1))
    print(name, verdict.status, [(r.code, r.line) for r in verdict.reasons])
    return verdict


INDIRECT_CHEATS = [
    # file, codes from the static rules, codes the dynamic checks must find (line None)
    # relu by a built string; aten::relu (and the reference's mul/add) run, no kernel of its own
    ("cheat_getattr_string.py", {"reuses_reference_op", "no_custom_kernel"},
     {"reuses_reference_op", "no_custom_kernel"}),
    # aten::mul / aten::add through torch.ops, relu as aten::clamp
    ("cheat_aten_ops.py", {"reuses_reference_op", "no_custom_kernel"},
     {"reuses_reference_op", "no_custom_kernel"}),
    # aten::hardtanh is relu's family: the trace compares op families too
    ("cheat_hardtanh_rewrite.py", {"reuses_reference_op", "no_custom_kernel"},
     {"reuses_reference_op", "no_custom_kernel"}),
    # its own kernel runs; aten::clamp_min is relu's family, so the trace names it as well
    ("cheat_alias_reexport.py", {"reuses_reference_op"}, {"reuses_reference_op"}),
    # the copied declaration is ignored, so the profiler's aten::relu is not excused
    ("cheat_copied_declaration.py", {"reuses_reference_op"}, {"reuses_reference_op"}),
]


@pytest.mark.parametrize("name, static_codes, dynamic_codes", INDIRECT_CHEATS,
                         ids=[c[0] for c in INDIRECT_CHEATS])
def test_indirect_cheat_is_rejected_statically_and_dynamically(name, static_codes,
                                                               dynamic_codes):
    verdict = _verify(REF, CANDIDATES / name, Path(name).stem)
    assert verdict.status == "rejected" and verdict.exit_code() == 1
    static = {r.code for r in verdict.reasons if r.line is not None}
    assert static_codes <= static, verdict.reasons
    dynamic = {r.code for r in verdict.reasons if r.line is None}
    assert dynamic_codes <= dynamic, verdict.reasons
    assert verdict.declared_torch_ops == {}


def test_copied_declaration_is_ignored_even_for_the_builtin_origin():
    verdict = _verify(REF, CANDIDATES / "cheat_copied_declaration.py",
                      "cheat_copied_declaration_builtin", CandidateOrigin.BUILTIN)
    assert verdict.status == "rejected" and verdict.declared_torch_ops == {}
    assert "reuses_reference_op" in {r.code for r in verdict.reasons if r.line is None}


def test_builtin_declaration_counts_only_for_the_builtin_origin(tmp_path):
    """conv2d_bias_relu keeps its convolution in cuDNN (declared): accepted as the built-in
    coder's own output, rejected as an untrusted file with the same text."""
    from kernelstitch.agents.coder.builtin import write_candidate
    from kernelstitch.agents.inprocess import generate_builtin

    source = EXAMPLES / "conv2d_bias_relu.py"
    path = write_candidate(generate_builtin(source, None, tmp_path / "model_new.py"), tmp_path)
    trusted = _verify(source, path, "conv2d_bias_relu_builtin", CandidateOrigin.BUILTIN)
    assert trusted.status == "accepted", trusted.reasons
    assert "aten::conv2d" in trusted.declared_torch_ops
    untrusted = _verify(source, path, "conv2d_bias_relu_untrusted")
    assert untrusted.status == "rejected" and untrusted.declared_torch_ops == {}
    assert {"reuses_reference_op"} == {r.code for r in untrusted.reasons}
    assert any(r.line is None for r in untrusted.reasons)  # the profiler's finding too


def test_the_cudnn_autotune_program_is_accepted_and_leaves_the_flag_as_it_found_it(tmp_path):
    """conv2d_bias_relu with the plan's cuDNN autotuning (variants.autotune_variant): the
    verifier's settings check (tamper.SETTINGS) finds cudnn.benchmark restored after every call,
    and so does this process after calling the program itself."""
    import importlib.util

    from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
    from kernelstitch.agents.planner.capture import capture
    from kernelstitch.agents.planner.variants import autotune_variant, propose_variants

    source = EXAMPLES / "conv2d_bias_relu.py"
    tuned = autotune_variant(propose_variants(capture(source), limit=1)[0])
    assert tuned is not None and tuned.plan.host.cudnn_benchmark
    path = write_candidate(code_builtin(tuned.plan, source, tmp_path / "model_new.py"), tmp_path)
    verdict = _verify(source, path, "conv2d_bias_relu_autotune", CandidateOrigin.BUILTIN)
    assert verdict.status == "accepted", verdict.reasons

    spec = importlib.util.spec_from_file_location("ks_autotune_program", path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    reference = importlib.util.spec_from_file_location("ks_autotune_reference", source)
    problem = importlib.util.module_from_spec(reference)
    reference.loader.exec_module(problem)
    model = program.ModelNew(*problem.get_init_inputs()).cuda()
    torch.backends.cudnn.benchmark = False
    model(*[x.cuda() for x in problem.get_inputs()])
    assert torch.backends.cudnn.benchmark is False
