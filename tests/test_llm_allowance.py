"""The PyTorch ops an untrusted (LLM) candidate may call come from our side, never from its text
(issue 21): the pipeline grants the ops the built-in planner's plan of the module leaves to
PyTorch (`builtin_torch_op_allowance`), the Coder is told exactly those, and the static rules
and the profiler check excuse exactly those; a `KERNELSTITCH_TORCH_OPS` in the candidate's file
adds nothing.  CPU only: the profiler check runs on synthetic profiles, the end-to-end run uses
the real Verifier (static checks, then "could not verify: no GPU")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kernelstitch.agents.pipeline import (
    PipelineConfig,
    builtin_torch_op_allowance,
    delivered_trust,
    remember_delivered,
    run_generate,
)
from kernelstitch.agents.verifier.assemble import Inputs, assemble
from kernelstitch.agents.verifier.declaration import CandidateOrigin, TorchOpAllowance
from kernelstitch.agents.verifier.runner import TaskOutcome
from kernelstitch.agents.verifier.static_checks import StaticReport, check_source
from kernelstitch.agents.verifier.trace_summary import CallProfile, reused_reference_ops
from kernelstitch.agents.verifier.verdict import Verdict, render_verdict_markdown
from llm_conv_scripts import (
    CALLS_RELU,
    CONV,
    CONV_ALLOWANCE,
    CONV_CHAIN,
    DECLARES_RELU,
    HONEST,
    HONEST_ATEN,
    TRANSPOSED,
)
from llm_scripts import KEY_ENV, SECRET, fenced, line_of
from llm_stub_server import StubLLM

from kernelstitch.core.runstore import RunStore
from kernelstitch.core.workspace import Workspace

CHAIN = Path(__file__).resolve().parent.parent / "examples" / "elementwise_chain.py"


def _static(source: str, allowance: TorchOpAllowance | None = CONV_ALLOWANCE,
            origin: CandidateOrigin = CandidateOrigin.UNTRUSTED):
    return check_source(source, CONV.read_text(), "Model", origin, allowance)


# ---- the allowance from the built-in plan -------------------------------------------------------

@pytest.fixture(scope="module")
def conv_plan():
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.planner.capture import capture

    return plan_builtin(capture(CONV, None))


def test_the_builtin_plan_of_a_conv_allows_its_library_call_and_nothing_else(conv_plan):
    allowance = builtin_torch_op_allowance(conv_plan, "Model")
    library = [s for s in conv_plan.steps if s.technique in ("library_call", "pytorch_fallback")]
    assert [s.spec["op"] for s in library] == ["aten.conv2d.default"]
    assert dict(allowance.ops) == {op: "library_call" for op in CONV_CHAIN}
    assert allowance.calls == ("torch.ops.aten.conv2d.default",)
    assert allowance.source.startswith("the built-in planner's plan of Model (s1 library_call: ")
    assert TorchOpAllowance.from_json(json.loads(json.dumps(allowance.to_json()))) == allowance


def test_a_plan_without_library_steps_allows_nothing():
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.planner.capture import capture

    allowance = builtin_torch_op_allowance(plan_builtin(capture(CHAIN, None)), "Model")
    assert dict(allowance.ops) == {} and allowance.calls == ()
    assert allowance.source == "the built-in planner's plan of Model (no step left to PyTorch)"


# ---- the static rules ---------------------------------------------------------------------------

@pytest.mark.parametrize("source", [HONEST, HONEST_ATEN], ids=["F.conv2d", "torch.ops.aten"])
def test_the_allowed_conv_passes_the_static_rules_only_with_the_allowance(source):
    allowed = _static(source)
    assert allowed.reasons == [], allowed.reasons
    assert allowed.declared_torch_ops == {} and allowed.excused_torch_ops == dict(
        CONV_ALLOWANCE.ops)
    assert any("PyTorch calls allowed by the caller: aten::_convolution" in n
               for n in allowed.notes)
    without = _static(source, allowance=None)
    assert without.codes() == ["reuses_reference_op"]
    assert without.reasons[0].detail["op"] == "conv2d"


def test_an_op_outside_the_allowance_is_still_reuse():
    report = _static(CALLS_RELU)
    assert report.codes() == ["reuses_reference_op"]
    reason = report.reasons[0]
    assert reason.detail["op"] == "relu" and reason.line == line_of(CALLS_RELU, "torch.relu")
    assert "only conv2d, convolution may stay in PyTorch here" in reason.message
    # the allowance is exact: a transposed convolution is of the conv family, not allowed
    transposed = _static(TRANSPOSED)
    assert transposed.codes() == ["reuses_reference_op"]
    assert transposed.reasons[0].detail["op"] == "conv_transpose2d"


@pytest.mark.parametrize("origin", list(CandidateOrigin))
def test_a_declaration_in_the_file_adds_nothing_to_the_allowance(origin):
    report = _static(DECLARES_RELU, origin=origin)  # unbound: not even BUILTIN honours it
    assert report.codes() == ["reuses_reference_op"]
    assert report.reasons[0].detail["op"] == "relu"
    assert report.declared_torch_ops == {}
    assert report.excused_torch_ops == dict(CONV_ALLOWANCE.ops)
    assert any("KERNELSTITCH_TORCH_OPS ignored" in n for n in report.notes)


# ---- the profiler check: families and the allowance --------------------------------------------

REFERENCE_OPS = {"aten::conv2d", "aten::convolution", "aten::_convolution",
                 "aten::cudnn_convolution", "aten::add_", "aten::relu", "aten::clamp_min",
                 "aten::mul", "aten::add", "aten::empty"}
CONV_NEST = [("aten::conv2d", ()), ("aten::convolution", ("aten::conv2d",)),
             ("aten::_convolution", ("aten::conv2d", "aten::convolution")),
             ("aten::cudnn_convolution", ("aten::conv2d", "aten::convolution",
                                          "aten::_convolution")),
             ("aten::add_", ("aten::conv2d", "aten::convolution", "aten::_convolution"))]


def _profiles(*ops: tuple[str, tuple[str, ...]]) -> list[CallProfile]:
    return [CallProfile(i, ["ks_epilogue_kernel"], [7], list(ops)) for i in range(2)]


def test_profiled_ops_are_compared_by_family_and_canonical_name():
    # relu rewritten as clamp_min / hardtanh / maximum: the reference's relu all the same
    for op in ("aten::clamp_min", "aten::hardtanh", "aten::maximum", "aten::relu_"):
        assert reused_reference_ops(_profiles((op, ())), REFERENCE_OPS, {}) == [op]
    # a linear dispatched as addmm or einsum is the reference's linear
    linear = {"aten::linear", "aten::t", "aten::addmm"}
    assert reused_reference_ops(_profiles(("aten::einsum", ()), ("aten::bmm", ())), linear,
                                {}) == ["aten::einsum", "aten::bmm"]
    # memory ops and unrelated compute are not reuse
    assert reused_reference_ops(_profiles(("aten::empty_like", ()), ("aten::copy_", ()),
                                           ("aten::sigmoid", ())), REFERENCE_OPS, {}) == []


def test_the_allowance_excuses_exactly_its_ops_and_what_runs_inside_them():
    allowed = dict(CONV_ALLOWANCE.ops)
    assert reused_reference_ops(_profiles(*CONV_NEST), REFERENCE_OPS, allowed) == []
    assert reused_reference_ops(_profiles(*CONV_NEST), REFERENCE_OPS, {}) == [
        "aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
        "aten::add_"]
    # a relu beside the allowed conv, and a transposed conv (same family, not in the list)
    found = reused_reference_ops(
        _profiles(*CONV_NEST, ("aten::clamp_min", ()), ("aten::conv_transpose2d", ())),
        REFERENCE_OPS, allowed)
    assert found == ["aten::clamp_min", "aten::conv_transpose2d"]


SEEDS = [11, 22, 33]


def _reference() -> TaskOutcome:
    cases = [{"id": f"s{s}", "seed": s, "shapes": None, "variant": None,
              "input_shapes": [[8, 64, 32, 32]]} for s in SEEDS]
    return TaskOutcome({
        "cuda": True, "device_name": "NVIDIA H100", "cases": cases, "variants": [],
        "reference_ops": sorted(REFERENCE_OPS), "mutates_inputs": False,
        "output_aliases_input": False, "nondeterministic": None, "notes": [],
        "timing": {"eager": {"samples_ms": [1.0] * 30, "unaccounted_ms": [0.005] * 30},
                   "compiled": {"samples_ms": [0.6] * 30, "unaccounted_ms": [0.005] * 30}}})


def _main(ops: list[tuple[str, tuple[str, ...]]]) -> TaskOutcome:
    checks = [{"name": name, "case": f"s{seed}", "seed": seed, "shapes": [[8, 64, 32, 32]],
               "passed": True, "failures": []}
              for name, seed in (("initial:s11", 11), ("after_warmup:s22", 22),
                                 ("after_warmup:s33", 33), ("recheck:s11", 11),
                                 ("timing_settings:s33", 33))]
    calls = [{"index": i, "kernels": ["ks_epilogue_kernel"], "own_kernels": ["ks_epilogue_kernel"],
              "streams": [7], "ops": [[op, list(anc)] for op, anc in ops]} for i in range(2)]
    return TaskOutcome({"phase": "main", "load_failure": None, "checks": checks, "tamper": [],
                        "profile": {"calls": calls},
                        "timing": {"samples_ms": [0.5] * 30, "unaccounted_ms": [0.005] * 30},
                        "fatal": None, "notes": []})


def test_the_verdict_applies_and_records_the_allowance():
    static = StaticReport(allowance=CONV_ALLOWANCE)
    verdict = assemble(Inputs(static=static, seeds=SEEDS, reference=_reference(),
                              main=_main(CONV_NEST)))
    assert verdict.status == "accepted", verdict.reasons
    assert verdict.torch_op_allowance == CONV_ALLOWANCE.to_json()
    assert Verdict.from_json(verdict.dumps()).torch_op_allowance == CONV_ALLOWANCE.to_json()
    text = render_verdict_markdown(verdict)
    assert "PyTorch calls allowed to this candidate: `aten::_convolution`" in text
    assert "(from the built-in planner's plan of Model (test))" in text
    # the relu as clamp_min beside it is rejected; without the allowance the conv is too
    rejected = assemble(Inputs(static=static, seeds=SEEDS, reference=_reference(),
                               main=_main([*CONV_NEST, ("aten::clamp_min", ())])))
    assert rejected.status == "rejected" and rejected.codes() == ["reuses_reference_op"]
    assert rejected.reasons[0].detail["ops"] == ["aten::clamp_min"]
    bare = assemble(Inputs(static=StaticReport(), seeds=SEEDS, reference=_reference(),
                           main=_main(CONV_NEST)))
    assert bare.codes() == ["reuses_reference_op"] and bare.torch_op_allowance is None


# ---- re-verification from disk ------------------------------------------------------------------

def test_an_adopted_file_keeps_its_allowance_only_while_it_and_its_reference_are_unchanged(
        tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    reference, candidate = tmp_path / "conv.py", tmp_path / "model_new.py"
    shutil.copy(CONV, reference)
    candidate.write_text(HONEST)
    assert delivered_trust(store, candidate, reference).allowance is None
    remember_delivered(store, candidate, reference, allowance=CONV_ALLOWANCE)
    assert delivered_trust(store, candidate, reference).allowance == CONV_ALLOWANCE
    assert not delivered_trust(store, candidate, reference).builtin
    candidate.write_text(HONEST + "\n# edited\n")
    assert delivered_trust(store, candidate, reference).allowance is None
    candidate.write_text(HONEST)
    reference.write_text(CONV.read_text() + "\n# edited\n")
    assert delivered_trust(store, candidate, reference).allowance is None


# ---- the LLM path end to end (stub server, real Verifier on CPU) --------------------------------

@pytest.fixture
def stub():
    with StubLLM() as server:
        yield server


def test_llm_candidates_on_a_conv_get_the_builtin_plans_allowance_and_no_more(
        stub, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    problem = tmp_path / CONV.name
    shutil.copy(CONV, problem)
    stub.reply(fenced(CALLS_RELU)).reply(fenced(DECLARES_RELU)).reply(fenced(HONEST))
    config = PipelineConfig(coder="llm", llm={
        "model": "stub-model", "api_key_env": KEY_ENV, "base_url": stub.base_url,
        "planner": False, "backoff_s": 0.05, "max_backoff_s": 1.0}, budget={"iterations": 3})
    result = run_generate(problem, None, Workspace(tmp_path), config, lambda _e: None)
    assert result.status == "succeeded", result.message
    assert "built-in kept" in result.message  # nothing can be accepted without a GPU

    requests = stub.chat_requests()
    assert len(requests) == 3
    task = requests[0].messages[1]["content"]
    assert "## PyTorch ops you may call" in task
    assert "`aten::conv2d` (library_call)" in task and "`aten::relu`" not in task
    assert "`torch.ops.aten.conv2d.default(...)`" in task
    system = requests[0].messages[0]["content"]
    assert "in your file is ignored" in system and "list that op in" not in system
    # reply 1 calls torch.relu: rejected, and the model is told which ops it may keep
    relu_line = line_of(CALLS_RELU, "torch.relu")
    feedback = requests[1].last_user
    assert f"`reuses_reference_op` line {relu_line}" in feedback and "rule 1" in feedback
    assert "only conv2d, convolution may stay in PyTorch here" in feedback
    # reply 2 declares relu in KERNELSTITCH_TORCH_OPS as well: still rejected
    assert f"`reuses_reference_op` line {line_of(DECLARES_RELU, 'torch.relu')}" in (
        requests[2].last_user)

    store = Workspace(tmp_path).runstore()
    verdicts = {a.name: a.content for a in store.artifacts(result.run_id, "verdict")}
    first, second, third = (verdicts[f"llm/attempt-{k}/verdict.json"] for k in (1, 2, 3))
    assert [r["code"] for r in first["reasons"]] == ["reuses_reference_op"]
    assert [r["detail"]["op"] for r in second["reasons"]] == ["relu"]
    assert any("KERNELSTITCH_TORCH_OPS ignored" in n for n in second["notes"])
    # reply 3 leaves only the allowed conv to PyTorch: the static checks pass it, and the
    # real Verifier (given the allowance by the pipeline) can go no further without a GPU
    assert third["status"] == "could_not_verify"
    assert [r["code"] for r in third["reasons"]] == ["no_gpu"]
    allowance = third["torch_op_allowance"]
    assert sorted(allowance["ops"]) == list(CONV_CHAIN)
    assert allowance["source"].startswith("the built-in planner's plan of Model (s1 library_call")
    for verdict in (first, second):
        assert verdict["torch_op_allowance"] == allowance
    logged = next(a.content for a in store.artifacts(result.run_id, "log")
                  if a.name == "llm/config.json")
    assert logged["torch_op_allowance"] == allowance and logged["prompt_version"] == "v2"
    report = Path(result.report_path).read_text()
    assert "- PyTorch ops LLM candidates may call: `aten::_convolution`" in report
    assert "| 3 | task 1/1 | could_not_verify | no CUDA GPU was found" in report


# ---- what the model is told ---------------------------------------------------------------------

def test_v2_prompts_list_the_allowance_and_v1_stays_frozen(conv_plan, tmp_path):
    from kernelstitch.agents.llm.coder_agent import RULE_OF_CODE, CoderAgent
    from kernelstitch.agents.llm.config import LlmConfig
    from kernelstitch.agents.llm.prompts import available_versions, load_prompts

    assert LlmConfig().prompt_version == "v2" and {"v1", "v2"} <= set(available_versions())
    v1, v2 = load_prompts("v1"), load_prompts("v2")
    assert "list that op in the module-level dict `KERNELSTITCH_TORCH_OPS`" in v1.templates[
        "rules"]  # a released version is never edited
    rules = v2.render("coder_system")
    assert "list that op in" not in rules and "in your file is ignored" in rules
    assert "no attribute looked up by a computed name" in rules
    assert RULE_OF_CODE["dynamic_torch_lookup"] == 1

    def task(allowance):
        agent = CoderAgent(None, v2, module="Model", source_name=CONV.name,
                           reference_source=CONV.read_text(), plan=conv_plan,
                           plan_origin="built-in planner", seed_source=None, seed_note="(none)",
                           baseline="", out_dir=tmp_path, verify=None, max_iterations=2,
                           allowance=allowance)
        return agent._task_message()

    listed = task(CONV_ALLOWANCE)
    assert "Verifier allows exactly these PyTorch calls here and no others: " \
           "`aten::_convolution` (library_call)" in listed
    assert "Call them as `torch.ops.aten.conv2d.default(...)`." in listed
    assert "None: every computation must run in your own kernels" in task(None)
    assert "None: every computation must run in your own kernels" in task(TorchOpAllowance())
