"""The LLM path of `generate`, after the built-in one: plan, code, verify, choose.

`run_llm_path` never makes the result worse than the built-in coder's:
* an LLM candidate replaces the built-in candidate only when the Verifier ACCEPTED it and
  either the built-in candidate was not accepted, or the LLM candidate's median time per call is
  lower than the built-in candidate's;
* without a verdict (no GPU: "could not verify", or verification off) an LLM candidate never
  replaces a built-in candidate; it stays on disk under `llm/attempt-N/` for inspection;
* any LLM failure (configuration, unreachable endpoint, persistent 5xx, budgets, malformed
  replies, a Verifier or other error mid-path) keeps the built-in result and says why in the
  report.
Cancellation raises `LlmCancelled` (the pipeline turns it into a cancelled job).

Everything is stored in the run store of the generate run: every request/reply (artifact kind
"prompt", `llm/NNN-<label>-try<k>.json`), the settings without secrets and the prompt manifest
("log", `llm/config.json`), the LLM plan ("plan", `llm/plan.json`), each attempt's file and
verdict ("candidate"/"verdict", `llm/attempt-N/...`) and a summary ("log", `llm/summary.json`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.agents.llm.coder_agent import Attempt, CoderAgent, CoderResult, timings_text
from kernelstitch.agents.llm.config import LlmConfig
from kernelstitch.agents.llm.errors import LlmCancelled, LlmError
from kernelstitch.agents.llm.limits import MAX_ERROR_CHARS, clip
from kernelstitch.agents.plan import Plan
from kernelstitch.agents.verifier.declaration import TorchOpAllowance
from kernelstitch.agents.verifier.verdict import Verdict

Progress = Callable[[str, str], None]  # (stage, message)


@dataclass
class LlmInputs:
    source: Path
    module: str
    graph: Any  # Graph
    builtin_plan: Plan | None
    builtin_source: str | None  # None: the built-in coder failed (builtin_error says why)
    builtin_error: str | None
    builtin_verdict: Verdict | None
    out_dir: Path  # the module's output folder; LLM attempts go to out_dir/llm/
    profile: dict[str, Any] | None = None  # baseline profile JSON (findings) if one exists
    # The PyTorch ops an LLM candidate may call: from the built-in plan (the pipeline's
    # builtin_torch_op_allowance), told to the Coder and applied by every check of its files.
    # None: none at all.
    torch_op_allowance: TorchOpAllowance | None = None
    precision: str = "fp32"  # the user's opt-in: told to the Coder, judged by the Verifier


@dataclass
class LlmOutcome:
    use_llm: bool = False  # the LLM candidate replaces the built-in one
    source: str | None = None  # the chosen LLM candidate's file text (when use_llm)
    attempt_path: str | None = None
    verdict: Verdict | None = None
    plan: Plan | None = None  # the plan the chosen LLM candidate implements
    plan_origin: str = ""
    decision: str = ""  # why the built-in or the LLM candidate is the result
    error: str | None = None  # the LLM failure, if one ended the path
    coder: CoderResult | None = None
    planner_errors: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    config: LlmConfig | None = None
    key_note: str | None = None
    elapsed_s: float = 0.0
    store_path: str | None = None
    run_id: int | None = None
    torch_op_allowance: TorchOpAllowance | None = None  # LlmInputs'

    def summary(self) -> str:
        """A short clause for the job's one-line message."""
        if self.use_llm:
            return "LLM candidate used"
        if self.error:
            return f"built-in kept; LLM: {self.error}"
        return f"built-in kept ({self.decision})"


def choose(builtin_verdict: Verdict | None, builtin_exists: bool,
           best: Attempt | None) -> tuple[bool, str]:
    """(use the LLM candidate, why).  See the module docstring."""
    if best is None or best.verdict is None or best.verdict.status != "accepted":
        return False, "no LLM candidate was accepted by the Verifier"
    if not builtin_exists:
        return True, "the built-in coder produced no candidate; the LLM candidate was accepted"
    if builtin_verdict is None or builtin_verdict.status != "accepted":
        status = builtin_verdict.status if builtin_verdict else "not verified"
        return True, (f"the LLM candidate was accepted and the built-in one was not "
                      f"({status.replace('_', ' ')})")
    b_t, l_t = builtin_verdict.timings, best.verdict.timings
    if b_t is None or l_t is None:
        return False, ("both candidates were accepted but without timings nothing shows the LLM "
                       "one is faster")
    if l_t.candidate_ms.median < b_t.candidate_ms.median:
        return True, (f"the LLM candidate is faster: {l_t.candidate_ms.median:.4f} ms vs "
                      f"{b_t.candidate_ms.median:.4f} ms per call (built-in)")
    return False, (f"the LLM candidate was accepted but is not faster: "
                   f"{l_t.candidate_ms.median:.4f} ms vs {b_t.candidate_ms.median:.4f} ms per "
                   "call (built-in)")


def run_llm_path(
    inputs: LlmInputs,
    *,
    llm_settings: dict[str, Any],
    budget: dict[str, Any],
    verify: Callable[[Path], Verdict] | None,
    store: Any,
    run_id: int,
    progress: Progress,
    cancel: threading.Event,
    profile_fn: Callable[[Path], dict[str, Any] | None] | None = None,
    environ: dict[str, str] | None = None,
) -> LlmOutcome:
    from kernelstitch.agents.llm.client import LlmClient
    from kernelstitch.agents.llm.prompts import load_prompts

    started = time.monotonic()
    outcome = LlmOutcome(plan=inputs.builtin_plan, plan_origin="built-in planner",
                         store_path=str(getattr(store, "path", "")) or None, run_id=run_id,
                         torch_op_allowance=inputs.torch_op_allowance)
    seq = [0]

    def record(exchange: Any) -> None:
        seq[0] += 1
        name = f"llm/{seq[0]:03d}-{exchange.label}-try{exchange.attempt}.json"
        store.add_artifact(run_id, "prompt", name, exchange.to_json())

    try:
        config = LlmConfig.from_settings(llm_settings, budget)
        outcome.config = config
        prompts = load_prompts(config.prompt_version)
        client = LlmClient(config, cancel=cancel, deadline=started + config.time_budget_s,
                           recorder=record, environ=environ, on_retry=lambda m: progress("coding", m),
                           meta={"prompt_version": config.prompt_version,
                                 "prompts": prompts.manifest()})
    except (LlmError, ValueError) as exc:
        outcome.error = str(exc)
        outcome.decision = "the LLM path could not start"
        progress("coding", f"LLM: {exc}")
        return _finish(outcome, store, run_id, started)
    outcome.key_note = client.key_note
    try:
        store.add_artifact(run_id, "log", "llm/config.json", {
            "settings": config.public(), "endpoint": config.endpoint,
            "prompt_version": config.prompt_version, "prompts": prompts.manifest(),
            "key": (f"read from ${config.api_key_env}" if config.api_key_env else "none")
            + (f" ({client.key_note})" if client.key_note else ""),
            "torch_op_allowance": (inputs.torch_op_allowance.to_json()
                                   if inputs.torch_op_allowance is not None else None),
        })
        progress("planning", f"LLM: {config.describe()}")
        if client.key_note:
            progress("planning", f"LLM: {client.key_note}")
        _plan(inputs, client, prompts, config, outcome, store, run_id, progress)
        if outcome.plan is None:
            outcome.error = outcome.error or "no plan to implement"
            outcome.decision = "neither planner produced a plan"
            return _finish(outcome, store, run_id, started, client)
        _code(inputs, client, prompts, config, outcome, verify, store, run_id, progress,
              profile_fn)
    except LlmCancelled:
        client.close()
        raise
    except Exception as exc:  # noqa: BLE001 - see below
        if cancel.is_set():  # the pipeline's own cancellation (its progress callback raises)
            client.close()
            raise
        # A transport/budget failure (LlmError) or a bug mid-path: whatever the LLM path had
        # found is dropped and the built-in candidate stays the result.
        outcome.use_llm, outcome.source, outcome.verdict = False, None, None
        outcome.error = (str(exc) if isinstance(exc, LlmError) else client.redact(
            f"the LLM path failed unexpectedly: {type(exc).__name__}: {exc}")[:2000])
        outcome.decision = "the LLM path stopped early"
    except BaseException:  # KeyboardInterrupt, SystemExit: release the connection
        client.close()
        raise
    return _finish(outcome, store, run_id, started, client)


def _plan(inputs: LlmInputs, client: Any, prompts: Any, config: LlmConfig,
          outcome: LlmOutcome, store: Any, run_id: int, progress: Progress) -> None:
    from kernelstitch.agents.llm.planner_agent import plan_with_llm

    if not config.planner:
        outcome.plan_origin = "built-in planner (the LLM planner is off)"
        return
    result = plan_with_llm(
        client, prompts, graph=inputs.graph,
        source_text=inputs.source.read_text(encoding="utf-8"), source_name=inputs.source.name,
        builtin_plan=inputs.builtin_plan, profile=inputs.profile,
        attempts=config.planner_attempts, progress=lambda m: progress("planning", m))
    outcome.planner_errors = result.errors
    if result.plan is not None:
        outcome.plan = result.plan
        outcome.plan_origin = "LLM planner" + (
            f" (valid after {result.replies} replies)" if result.replies > 1 else "")
        store.add_artifact(run_id, "plan", "llm/plan.json", result.plan.to_json())
        progress("planning", f"LLM plan: {len(result.plan.steps)} steps")
    else:
        last = result.errors[-1] if result.errors else "?"
        outcome.plan_origin = (f"built-in planner (the LLM planner's {result.replies} plans "
                               f"were invalid; last error: {last})")
        progress("planning", "LLM planner: no valid plan; implementing the built-in plan")


def _code(inputs: LlmInputs, client: Any, prompts: Any, config: LlmConfig,
          outcome: LlmOutcome, verify: Callable[[Path], Verdict] | None, store: Any,
          run_id: int, progress: Progress,
          profile_fn: Callable[[Path], dict[str, Any] | None] | None) -> None:
    builtin_ms = None
    bv = inputs.builtin_verdict
    if bv is not None and bv.status == "accepted" and bv.timings is not None:
        builtin_ms = bv.timings.candidate_ms.median
    if inputs.builtin_source is not None:
        seed_note = ("This is the built-in compiler's candidate for the built-in plan. It follows "
                     "the rules; start from it (keep its constructor and parameter handling) and "
                     "change what the plan above needs.")
    else:
        seed_note = (f"The built-in compiler could not produce a candidate "
                     f"({inputs.builtin_error}); write the file from scratch.")
    if bv is None:
        baseline = "The built-in candidate was not verified."
    elif bv.status == "accepted":
        baseline = f"The built-in candidate was accepted: {timings_text(bv)}. Beat it."
    else:
        why = "; ".join(f"{r.code}: {r.message}" for r in bv.reasons[:3]) or bv.status
        baseline = f"The built-in candidate's verdict: {bv.status.replace('_', ' ')} ({why})."
    if inputs.profile:
        from kernelstitch.agents.llm.planner_agent import profile_text

        baseline += "\n\nBaseline profile of the reference:\n" + profile_text(inputs.profile)

    def on_attempt(attempt: Attempt) -> None:
        if attempt.source is not None:
            store.add_artifact(run_id, "candidate", f"llm/attempt-{attempt.index}/model_new.py",
                               attempt.source)
        if attempt.verdict is not None:
            store.add_artifact(run_id, "verdict", f"llm/attempt-{attempt.index}/verdict.json",
                               attempt.verdict.to_json())

    agent = CoderAgent(
        client, prompts, module=inputs.module, source_name=inputs.source.name,
        reference_source=inputs.source.read_text(encoding="utf-8"), plan=outcome.plan,
        plan_origin=outcome.plan_origin, seed_source=inputs.builtin_source, seed_note=seed_note,
        baseline=baseline, out_dir=inputs.out_dir / "llm", verify=verify,
        max_iterations=config.max_iterations, profile=profile_fn, builtin_ms=builtin_ms,
        progress=progress, on_attempt=on_attempt, allowance=inputs.torch_op_allowance,
        precision=inputs.precision)
    result = agent.run()
    outcome.coder = result
    outcome.error = outcome.error or result.error
    use, why = choose(bv, inputs.builtin_source is not None, result.best)
    outcome.use_llm, outcome.decision = use, why
    if use and result.best is not None:
        outcome.source = result.best.source
        outcome.attempt_path = result.best.path
        outcome.verdict = result.best.verdict
    elif result.best is None and result.last_checked is not None:
        outcome.attempt_path = result.last_checked.path
        if result.last_checked.verdict is not None and (
                result.last_checked.verdict.status == "could_not_verify"):
            outcome.decision = ("the LLM candidate could not be verified "
                                f"({result.last_checked.message}); an unverified LLM candidate "
                                "never replaces the built-in one")
        elif result.last_checked.outcome == "unverified":
            outcome.decision = ("verification is off; an unverified LLM candidate never "
                                "replaces the built-in one")


def _finish(outcome: LlmOutcome, store: Any, run_id: int, started: float,
            client: Any = None) -> LlmOutcome:
    outcome.elapsed_s = time.monotonic() - started
    if outcome.error:  # it reaches the job's message, the report and the store
        outcome.error = clip(outcome.error, MAX_ERROR_CHARS)
    if client is not None:
        u = client.usage
        outcome.usage = {"prompt_tokens": u.prompt_tokens, "completion_tokens":
                         u.completion_tokens, "total_tokens": u.total_tokens,
                         "requests": u.requests}
        client.close()
    coder = outcome.coder
    store.add_artifact(run_id, "log", "llm/summary.json", {
        "use_llm": outcome.use_llm, "decision": outcome.decision, "error": outcome.error,
        "plan_origin": outcome.plan_origin, "planner_errors": outcome.planner_errors,
        "attempts": [a.summary() for a in coder.attempts] if coder else [],
        "stop_reason": coder.stop_reason if coder else None,
        "usage": outcome.usage, "elapsed_s": round(outcome.elapsed_s, 3),
    })
    return outcome


def render_llm_section(outcome: LlmOutcome, builtin_exists: bool,
                       builtin_verdict: Verdict | None = None) -> str:
    """The report's "LLM agents" section."""
    lines = ["## LLM agents", ""]
    if not builtin_exists:
        lines.append("- built-in candidate: none (the built-in coder failed)")
    elif builtin_verdict is None:
        lines.append("- built-in candidate: not verified")
    else:
        extra = (f", {timings_text(builtin_verdict)}" if builtin_verdict.timings
                 else "".join(f", {r.code}" for r in builtin_verdict.reasons[:3]))
        lines.append(f"- built-in candidate: {builtin_verdict.status.replace('_', ' ')}{extra}")
    cfg = outcome.config
    if cfg is not None:
        lines.append(f"- endpoint: {cfg.describe()}")
        lines.append(f"- prompts: version `{cfg.prompt_version}` "
                     "(agents/llm/prompts/" + cfg.prompt_version + "/)")
    if outcome.key_note:
        lines.append(f"- note: {outcome.key_note}")
    lines.append(f"- plan: {outcome.plan_origin}")
    for k, error in enumerate(outcome.planner_errors, start=1):
        lines.append(f"  - planner reply {k} rejected: {error}")
    allowance = outcome.torch_op_allowance
    if allowance is not None:
        ops = ", ".join(f"`{op}`" for op in allowance.ops) or "none"
        lines.append(f"- PyTorch ops LLM candidates may call: {ops} (from {allowance.source}; "
                     "a declaration in a candidate's file is ignored)")
    if outcome.usage:
        u = outcome.usage
        budget = f" of {cfg.token_budget}" if cfg and cfg.token_budget else ""
        lines.append(f"- usage: {u.get('requests', 0)} request(s), {u.get('total_tokens', 0)} "
                     f"tokens{budget}, {outcome.elapsed_s:.1f} s")
    if outcome.store_path and outcome.run_id is not None:
        lines.append(f"- every prompt and reply: run {outcome.run_id} in `{outcome.store_path}` "
                     "(artifacts of kind `prompt`, named `llm/...`)")
    if outcome.error:
        lines.append(f"- LLM error: {outcome.error}")
    lines.append("")
    kept = "the built-in candidate" if builtin_exists else "no candidate"
    if outcome.use_llm:
        lines.append(f"**Result: the LLM candidate (reply {_reply_of(outcome)}) is used: "
                     f"{outcome.decision}.**")
    else:
        lines.append(f"**Result: kept {kept}: {outcome.decision}.**")
    coder = outcome.coder
    if coder is not None and coder.attempts:
        lines += ["", "| reply | task | outcome | detail | file |", "|---|---|---|---|---|"]
        for a in coder.attempts:
            detail = a.message.replace("|", "\\|").replace("\n", " ")[:300]
            lines.append(f"| {a.index} | {a.task} | {a.outcome} | {detail} | "
                         f"{'`' + a.path + '`' if a.path else ''} |")
        lines += ["", f"Stopped: {coder.stop_reason}."]
    return "\n".join(lines) + "\n"


def _reply_of(outcome: LlmOutcome) -> str:
    if outcome.coder and outcome.coder.best:
        return str(outcome.coder.best.index)
    return "?"
