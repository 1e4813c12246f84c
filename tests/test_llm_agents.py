"""The LLM Planner and Coder agents over the loopback OpenAI-API server: reply extraction,
plan validation and retry, the coder's feedback loop (malformed replies, static rejections,
scripted verdicts), with the real `openai` client."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from kernelstitch.agents.llm.coder_agent import CoderAgent, compact_seed
from kernelstitch.agents.llm.errors import LlmCancelled, LlmReplyError
from kernelstitch.agents.llm.extract import extract_json, extract_python
from kernelstitch.agents.llm.planner_agent import graph_text, plan_with_llm, validate_plan
from kernelstitch.agents.llm.prompts import available_versions, load_prompts
from kernelstitch.agents.plan import PlanError
from llm_scripts import (
    CALL_NODES,
    COMPILE_BUG,
    EXAMPLE,
    GOOD,
    HACK_CACHE,
    HACK_TORCH,
    WRONG,
    ScriptedVerifier,
    fenced,
    line_of,
    plan_json,
)
from llm_scripts import stub_client as client_for
from llm_stub_server import StubLLM


@pytest.fixture(scope="module")
def graph():
    from kernelstitch.agents.planner.capture import capture

    return capture(EXAMPLE, None)


@pytest.fixture
def stub():
    with StubLLM() as server:
        yield server


# ---- extraction ---------------------------------------------------------------------------------

def test_extract_python_takes_the_model_new_block():
    text = "First a helper:\n```cuda\n__global__ void k() {}\n```\n" + fenced(GOOD)
    assert extract_python(text) == GOOD


@pytest.mark.parametrize("reply, finish, expected", [
    ("I would fuse the ops into one kernel.", "stop", "no ```python code block"),
    (fenced(GOOD.replace("class ModelNew", "class FusedModel")), "stop",
     "defines _LazyExtension, FusedModel but no class ModelNew"),
    (fenced(GOOD), "length", "cut off"),
    ("```python\n" + GOOD[: len(GOOD) // 2], "stop", "cut off"),
    (fenced(GOOD.replace("    def forward(self, x):", "    def forward(self, x)")), "stop",
     "does not parse: line"),
    (fenced(GOOD.replace("def forward", "def compute")), "stop", "has no forward method"),
])
def test_extract_python_rejects_malformed_replies_with_a_clear_message(reply, finish, expected):
    with pytest.raises(LlmReplyError) as info:
        extract_python(reply, finish, 4096)
    assert expected in str(info.value)


def test_extract_json_variants():
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure! {"a": [1, 2]} hope it helps') == {"a": [1, 2]}
    with pytest.raises(LlmReplyError, match="no JSON object"):
        extract_json("no json here")
    with pytest.raises(LlmReplyError, match="not valid JSON"):
        extract_json('{"a": 1,,}')
    with pytest.raises(LlmReplyError, match="cut off"):
        extract_json('{"a": ', "length")


# ---- plans ---------------------------------------------------------------------------------------

def test_builtin_plan_passes_the_llm_plan_validation(graph):
    from kernelstitch.agents.planner.builtin import plan_builtin

    plan = plan_builtin(graph)
    assert validate_plan(plan.to_json(), graph).steps[0].nodes == plan.steps[0].nodes


@pytest.mark.parametrize("mutate, expected", [
    (lambda p: p["steps"][0].update(nodes=CALL_NODES + ["bogus"]), "['bogus'] are not graph"),
    (lambda p: p["steps"][0].update(nodes=CALL_NODES[:-1]), "clamp are covered by no step"),
    (lambda p: p["steps"].append({**p["steps"][0], "id": "k2", "nodes": ["relu"]}),
     "'relu' is already computed by step 'k1'"),
    (lambda p: p["steps"][0].update(technique="magic"), "is not one of"),
    (lambda p: p["steps"][0].update(spec=None), "needs its kernel spec"),
    (lambda p: p.update(steps=[]), "empty"),
])
def test_invalid_plans_are_rejected_with_the_reason(graph, mutate, expected):
    data = json.loads(plan_json())
    mutate(data)
    with pytest.raises(PlanError) as info:
        validate_plan(data, graph)
    assert expected in str(info.value)


def test_planner_retries_with_the_validation_error(stub, graph):
    stub.reply("Let me think about fusion first.")  # no JSON at all
    stub.reply(plan_json(nodes=["mul", "add", "relu", "mul_1", "clamp", "ghost"]))
    stub.reply(f"```json\n{plan_json()}\n```")
    result = plan_with_llm(
        client_for(stub), load_prompts("v1"), graph=graph, source_text=EXAMPLE.read_text(),
        source_name=EXAMPLE.name, builtin_plan=None, attempts=3)
    assert result.plan is not None and result.replies == 3
    assert [s.nodes for s in result.plan.steps] == [CALL_NODES]
    assert result.plan.module == "Model"
    first, second, third = stub.chat_requests()
    assert "clamp = aten.clamp" in first.messages[1]["content"]  # the graph was sent
    assert first.body["response_format"] == {"type": "json_object"}
    assert "contains no JSON object" in second.last_user
    assert "['ghost'] are not graph nodes" in third.last_user
    assert len(third.messages) == 4  # system, task, last reply, its error (bounded context)


def test_planner_gives_up_after_its_attempts(stub, graph):
    for _ in range(2):
        stub.reply('{"steps": "not a list"}')
    result = plan_with_llm(
        client_for(stub), load_prompts("v1"), graph=graph, source_text=EXAMPLE.read_text(),
        source_name=EXAMPLE.name, builtin_plan=None, attempts=2)
    assert result.plan is None and len(result.errors) == 2
    assert "plan.steps: expected list" in result.errors[0]


def test_graph_text_lists_nodes_shapes_and_lines(graph):
    text = graph_text(graph)
    assert "x: input #0 float32[" in text
    assert "@ line 22" in text and text.splitlines()[-1] == "return clamp"


def test_prompts_are_versioned_and_state_the_rules():
    assert "v1" in available_versions()
    prompts = load_prompts("v1")
    system = prompts.render("coder_system")
    for rule in ("torch.compile", "cache", "side streams", "timer", "every element",
                 "all shapes", "try"):
        assert rule in system
    assert "$" not in prompts.render("planner_system")
    assert set(prompts.manifest()) >= {"rules", "coder_system", "planner_system"}
    with pytest.raises(ValueError, match="no prompt version"):
        load_prompts("v999")


# ---- the coder loop ---------------------------------------------------------------------------

def run_coder(stub, tmp_path, graph, verifier, max_iterations=4, seed=None, client=None):
    from kernelstitch.agents.planner.builtin import plan_builtin

    attempts = []
    agent = CoderAgent(
        client or client_for(stub), load_prompts("v1"), module="Model", source_name=EXAMPLE.name,
        reference_source=EXAMPLE.read_text(), plan=plan_builtin(graph),
        plan_origin="built-in planner", seed_source=seed, seed_note="(no seed)",
        baseline="The built-in candidate takes 1.0 ms.", out_dir=tmp_path / "llm",
        verify=lambda path: verifier(EXAMPLE, path, "Model", threading.Event()),
        max_iterations=max_iterations, builtin_ms=1.0, on_attempt=attempts.append)
    return agent.run(), attempts


def test_coder_recovers_from_malformed_replies(stub, tmp_path, graph):
    stub.reply("I cannot write code today.")
    stub.reply(fenced(GOOD.replace("class ModelNew", "class Model2")))
    stub.reply(fenced(GOOD[:900]), finish_reason="length")
    stub.reply(fenced(GOOD))
    verifier = ScriptedVerifier()
    result, attempts = run_coder(stub, tmp_path, graph, verifier)
    assert [a.outcome for a in result.attempts] == ["malformed"] * 3 + ["accepted"]
    assert attempts == result.attempts  # reported as they happened
    requests = stub.chat_requests()
    assert "no ```python code block" in requests[1].last_user
    assert "no class ModelNew" in requests[2].last_user
    assert "cut off" in requests[3].last_user and "finish_reason=length" in requests[3].last_user
    assert result.best is result.attempts[3] and result.best.candidate_ms == 0.5
    assert len(verifier.calls) == 1  # malformed replies never reach the Verifier
    assert Path(result.best.path).read_text() == GOOD


def test_coder_feeds_compile_errors_back_with_candidate_lines(stub, tmp_path, graph):
    stub.reply(fenced(COMPILE_BUG)).reply(fenced(GOOD))
    result, _ = run_coder(stub, tmp_path, graph, ScriptedVerifier(), max_iterations=2)
    line = line_of(COMPILE_BUG, "// BUG")
    feedback = stub.chat_requests()[1].last_user
    assert f"`compile_error` line {line}" in feedback
    assert f">{line:5d} |     int bad = undefined_symbol;" in feedback
    assert 'identifier "undefined_symbol" is undefined' in feedback
    assert [a.outcome for a in result.attempts] == ["rejected", "accepted"]


def test_coder_feeds_wrong_outputs_back_and_reports_speed(stub, tmp_path, graph):
    stub.reply(fenced(WRONG)).reply(fenced(GOOD)).reply(fenced(GOOD.replace("TIME_MS=0.5",
                                                                            "TIME_MS=0.4")))
    result, _ = run_coder(stub, tmp_path, graph, ScriptedVerifier(), max_iterations=3)
    requests = stub.chat_requests()
    assert "`wrong_output`" in requests[1].last_user
    assert '"max_abs_diff": 0.25' in requests[1].last_user
    assert "ACCEPTED" in requests[2].last_user and "0.5000 ms" in requests[2].last_user
    assert "built-in compiler's candidate takes 1.0000 ms" in requests[2].last_user
    assert result.best.index == 3 and result.best.candidate_ms == 0.4


def test_coder_rejects_reward_hacks_with_the_static_rules(stub, tmp_path, graph):
    stub.reply(fenced(HACK_TORCH)).reply(fenced(HACK_CACHE))
    verifier = ScriptedVerifier()
    result, _ = run_coder(stub, tmp_path, graph, verifier, max_iterations=2)
    assert [a.outcome for a in result.attempts] == ["static_rejected", "static_rejected"]
    assert "reuses_reference_op" in result.attempts[0].message
    assert "cached_output" in result.attempts[1].message
    assert verifier.calls == []  # rejected before anything would run
    feedback = stub.chat_requests()[1].last_user
    assert "`reuses_reference_op`" in feedback and "breaks rule 1" in feedback
    assert result.best is None


def test_coder_stops_when_the_candidate_cannot_be_verified(stub, tmp_path, graph):
    from kernelstitch.agents.verifier.verdict import Reason, Verdict

    stub.reply(fenced(GOOD)).reply(fenced(GOOD))
    no_gpu = Verdict("could_not_verify", [Reason("no_gpu", "no CUDA GPU was found")])
    result, _ = run_coder(stub, tmp_path, graph, lambda *a: no_gpu)
    assert len(stub.chat_requests()) == 1  # nothing to learn without a verdict
    assert result.best is None and result.last_checked.outcome == "could_not_verify"
    assert "no CUDA GPU" in result.stop_reason


def test_compact_seed_puts_the_plan_literal_on_one_line(tmp_path, graph):
    from kernelstitch.agents.coder.builtin import code_builtin
    from kernelstitch.agents.planner.builtin import plan_builtin

    source = code_builtin(plan_builtin(graph), EXAMPLE, tmp_path / "m.py").source
    compact = compact_seed(source)
    assert len(compact) < len(source) and "class ModelNew" in compact
    line = next(x for x in compact.splitlines() if x.startswith("KERNELSTITCH_PLAN = "))
    assert json.loads(line.split("'''")[1])["module"] == "Model"


class _BrokenSecondTime(ScriptedVerifier):
    """The Verifier accepts the first file, then fails with an exception (a bug, a lost worker)."""

    def __call__(self, reference, candidate_path, module, cancel):
        if self.calls:
            self.calls.append(candidate_path)
            raise RuntimeError("verifier bug")
        return super().__call__(reference, candidate_path, module, cancel)


def test_a_verifier_exception_is_no_verdict_and_keeps_the_accepted_file(stub, tmp_path, graph):
    faster = GOOD.replace("TIME_MS=0.5", "TIME_MS=0.1")
    stub.reply(fenced(GOOD)).reply(fenced(faster)).reply(fenced(GOOD))
    result, _ = run_coder(stub, tmp_path, graph, _BrokenSecondTime(), max_iterations=3)
    assert [a.outcome for a in result.attempts] == ["accepted", "could_not_verify"]
    assert result.best is result.attempts[0]  # the unjudged (faster) file is never "best"
    assert result.attempts[1].verdict.codes() == ["verifier_error"]
    assert "the Verifier failed: RuntimeError: verifier bug" in result.stop_reason
    assert len(stub.chat_requests()) == 2  # nothing to learn from it: the loop stopped


def test_a_verdict_of_unknown_status_is_never_an_acceptance(stub, tmp_path, graph):
    from kernelstitch.agents.verifier.verdict import Verdict

    stub.reply(fenced(GOOD))
    odd = Verdict("skipped", timings=None)  # e.g. from a newer Verifier
    result, _ = run_coder(stub, tmp_path, graph, lambda *a: odd, max_iterations=1)
    assert result.best is None and result.attempts[0].outcome == "could_not_verify"


def test_cancel_while_verifying_is_not_swallowed(stub, tmp_path, graph):
    stub.reply(fenced(GOOD))
    client = client_for(stub)

    def cancelled_verifier(*_args):
        client.cancel.set()  # the pipeline's progress callback raises once cancel is set
        raise RuntimeError("pipeline Cancelled")

    with pytest.raises(RuntimeError, match="pipeline Cancelled"):
        run_coder(stub, tmp_path, graph, cancelled_verifier, client=client)
    from kernelstitch.agents.verifier.verdict import Reason, Verdict

    stub.reply(fenced(GOOD))
    verdict = Verdict("could_not_verify", [Reason("cancelled", "cancelled")])
    with pytest.raises(LlmCancelled):
        run_coder(stub, tmp_path, graph, lambda *a: verdict)
