"""The LLM Coder: implement the plan step by step, then improve from feedback.

Each reply must hold the complete candidate file.  A reply goes through, in order:
1. extraction (extract.py): a ```python block, not truncated, parses, defines ModelNew.forward;
2. the Verifier's static rules (check_source, pure `ast`: works without a GPU) with the
   allowance the pipeline's Verifier gets too (the PyTorch ops the built-in plan leaves to
   PyTorch, listed in the prompt; a declaration in the reply's file is ignored), so the cheats
   they can see are rejected with their named reason even offline (the rest needs a GPU);
3. once every task of the plan is in place, the injected `verify` (the real Verifier in worker
   processes, or a scripted one in tests).
Whatever fails is sent back as the next user message: the malformed-reply message, the rejection
codes with candidate line numbers and a snippet of those lines, compiler diagnostics, wrong-output
details, or (after an acceptance) the timings and profiler findings with a request to go faster.
The loop ends at `max_iterations` replies, when the time/token budget is spent, when a
verdict cannot be reached (no GPU: there is nothing to learn from), or on an LLM error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.agents.llm.errors import LlmBudgetExceeded, LlmCancelled, LlmError, LlmReplyError
from kernelstitch.agents.llm.extract import extract_python
from kernelstitch.agents.llm.limits import (
    MAX_ERROR_CHARS,
    MAX_FEEDBACK_CHARS,
    MAX_NOTE_CHARS,
    MAX_PLAN_CHARS,
    clip,
)
from kernelstitch.agents.llm.planner_agent import profile_text
from kernelstitch.agents.plan import Plan, render_step_markdown
from kernelstitch.agents.verifier.declaration import TorchOpAllowance
from kernelstitch.agents.verifier.static_checks import check_source
from kernelstitch.agents.verifier.tolerances import PRECISION_TOLERANCES
from kernelstitch.agents.verifier.verdict import Reason, Verdict

from kernelstitch.core.precision import precision_mode

VerifyFn = Callable[[Path], Verdict]
ProfileFn = Callable[[Path], "dict[str, Any] | None"]
Progress = Callable[[str, str], None]  # (stage, message)

SNIPPET_CONTEXT = 2
MAX_COMPILER_OUTPUT = 2500
MIN_ITERATION_S = 5.0  # do not start a reply with less time than this left
# Which rule (rules.md) a rejection code breaks: named in the feedback.
RULE_OF_CODE = {
    "reuses_reference_op": 1, "calls_reference_forward": 1, "no_custom_kernel": 1,
    "uses_torch_compile": 2, "cached_output": 3, "output_reused_across_calls": 3,
    "side_stream_work": 4, "incomplete_on_return": 4, "monkeypatches_runtime": 5,
    "timer_tampering": 5, "unwritten_output": 6, "output_aliases_input": 6, "mutates_input": 6,
    "shape_specialised": 7, "silent_fallback": 8, "behaviour_changes_after_warmup": 10,
    "behaviour_changes_when_timed": 10,
    "hides_torch_ops": 10, "dynamic_torch_lookup": 1,
}
_PLAN_LITERAL = re.compile(r"^KERNELSTITCH_PLAN = r?'''.*?'''$", re.MULTILINE | re.DOTALL)


@dataclass
class Attempt:
    index: int  # reply number, 1-based
    task: str
    outcome: str  # malformed | static_rejected | step_done | rejected | could_not_verify |
    #               unverified | accepted
    message: str  # one line for the report
    source: str | None = None
    path: str | None = None
    verdict: Verdict | None = None
    finish_reason: str | None = None

    @property
    def candidate_ms(self) -> float | None:
        t = self.verdict.timings if self.verdict is not None else None
        return t.candidate_ms.median if t is not None else None

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "task": self.task, "outcome": self.outcome,
                "message": self.message, "path": self.path, "candidate_ms": self.candidate_ms,
                "verdict": self.verdict.status if self.verdict else None,
                "codes": self.verdict.codes() if self.verdict else [],
                "finish_reason": self.finish_reason}


@dataclass
class CoderResult:
    attempts: list[Attempt] = field(default_factory=list)
    best: Attempt | None = None  # the fastest accepted attempt
    last_checked: Attempt | None = None  # the last attempt that passed the static rules
    stop_reason: str = ""
    error: str | None = None  # the LLM error that ended the loop, if one did


def compact_seed(source: str) -> str:
    """The built-in candidate with its (long, indented) plan literal on one line."""
    def one_line(match: re.Match[str]) -> str:
        text = match.group(0)
        body = text[text.index("'''") + 3:text.rindex("'''")]
        try:
            return "KERNELSTITCH_PLAN = r'''" + json.dumps(json.loads(body)) + "'''"
        except ValueError:
            return text
    return _PLAN_LITERAL.sub(one_line, source, count=1)


def numbered_snippet(source: str, line: int, context: int = SNIPPET_CONTEXT) -> str:
    lines = source.splitlines()
    lo, hi = max(1, line - context), min(len(lines), line + context)
    return "\n".join(f"{'>' if k == line else ' '}{k:5d} | {lines[k - 1]}"
                     for k in range(lo, hi + 1))


def format_reasons(reasons: list[Reason], source: str | None, header: str) -> str:
    """Rejection reasons for the model: code, candidate line, message, the broken rule, the
    offending lines and (for compile errors) the compiler's diagnostics."""
    out = [header]
    for r in reasons:
        where = f" line {r.line}" if r.line else ""
        out.append(f"- `{r.code}`{where}: {r.message}")
        rule = RULE_OF_CODE.get(r.code)
        if rule is not None:
            out.append(f"  This breaks rule {rule}: it is not a performance problem, the "
                       "approach itself is not allowed. Remove it entirely.")
        detail = dict(r.detail or {})
        diagnostics = detail.pop("diagnostics", None) or []
        compiler_output = detail.pop("compiler_output", None)
        for d in diagnostics[:10]:
            at = f"candidate line {d['line']}" if d.get("line") else (
                f"{d.get('generated_file', '?')}:{d.get('generated_line', '?')}")
            out.append(f"  {d.get('severity', 'error')} at {at}: {d.get('message', '')}")
            if source and d.get("line"):
                out.append(_indent(numbered_snippet(source, int(d["line"]), 1), "    "))
        if source and r.line and not diagnostics:
            out.append(_indent(numbered_snippet(source, r.line), "    "))
        if compiler_output and not diagnostics:
            out.append("  compiler output (end):\n" + _indent(
                str(compiler_output)[-MAX_COMPILER_OUTPUT:], "    "))
        detail.pop("occurrences", None)
        if detail:
            text = json.dumps(detail, default=str)
            out.append(f"  details: {text[:600]}")
    return "\n".join(out)


def timings_text(verdict: Verdict) -> str:
    t = verdict.timings
    if t is None:
        return "(timing was not run)"
    c = t.candidate_ms
    parts = [f"candidate {c.median:.4f} ms (p10 {c.p10:.4f}, p90 {c.p90:.4f})",
             f"PyTorch eager {t.eager_ms.median:.4f} ms"]
    if t.compiled_ms is not None:
        parts.append(f"torch.compile {t.compiled_ms.median:.4f} ms")
    speed = f"{t.speedup_vs_eager:.2f}x vs eager"
    if t.speedup_vs_compiled is not None:
        speed += f", {t.speedup_vs_compiled:.2f}x vs torch.compile"
    return "; ".join(parts) + f" ({speed})"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def precision_text(precision: str) -> str:
    """The precision the user allowed, as the Coder's task states it (nothing for fp32: the
    rules' strict numerics apply)."""
    mode = precision_mode(precision)
    if not mode.reduced:
        return ""
    bound = PRECISION_TOLERANCES[mode.name]
    return (f". Precision {mode.name}: the user allows {mode.gemm} for matrix products "
            f"(tensor cores: TF32 / bf16 / fp16 MMA with fp32 accumulation) and TF32 for PyTorch's "
            f"matmuls and convolutions; the Verifier compares float32 outputs with a float64 "
            f"recomputation at rtol {bound.rtol:g}, atol {bound.atol:g} x RMS, so this overrides "
            "rule 9 for matrix products only; restore any torch setting you change before "
            "forward returns")


class CoderAgent:
    def __init__(
        self,
        client: Any,
        prompts: Any,
        *,
        module: str,
        source_name: str,
        reference_source: str,
        plan: Plan,
        plan_origin: str,
        seed_source: str | None,
        seed_note: str,
        baseline: str,
        out_dir: Path,
        verify: VerifyFn | None,
        max_iterations: int,
        profile: ProfileFn | None = None,
        builtin_ms: float | None = None,
        progress: Progress | None = None,
        on_attempt: Callable[[Attempt], None] | None = None,
        step_by_step: bool = True,
        allowance: TorchOpAllowance | None = None,
        precision: str = "fp32",
    ) -> None:
        """`allowance`: the PyTorch ops the caller's Verifier lets this module's candidates
        call (the pipeline's, from the built-in plan): rendered into the task and applied by
        the static checks here as in `verify`.  None: no PyTorch op is allowed."""
        self.client = client
        self.prompts = prompts
        self.module = module
        self.source_name = source_name
        self.reference_source = reference_source
        self.plan = plan
        self.precision = precision  # the user's opt-in, what the Verifier judges at
        self.plan_origin = plan_origin
        self.seed_source = seed_source
        self.seed_note = seed_note
        self.baseline = baseline
        self.out_dir = Path(out_dir)
        self.verify = verify
        self.max_iterations = max_iterations
        self.profile = profile
        self.builtin_ms = builtin_ms
        self.progress = progress or (lambda _s, _m: None)
        self.on_attempt = on_attempt or (lambda _a: None)
        self.allowance = allowance
        self.tasks = self._tasks(step_by_step)

    # ---- prompts ------------------------------------------------------------------------------

    def _tasks(self, step_by_step: bool) -> list[str]:
        kernel_steps = [s for s in self.plan.steps if s.is_kernel]
        # One task per kernel step only when there is room to verify after the last one.
        if step_by_step and 1 < len(kernel_steps) < self.max_iterations:
            return [f"implement step {s.id} ({s.technique}): "
                    f"{clip(s.description, MAX_NOTE_CHARS)}"
                    + (f" (lines {', '.join(map(str, s.source_lines))})" if s.source_lines
                       else "") for s in kernel_steps]
        return ["implement the whole plan (every step above) in one complete file"]

    def _allowed_ops_text(self) -> str:
        """What the model may leave to PyTorch: the allowance, never the plan's own claims."""
        ops = dict(self.allowance.ops) if self.allowance is not None else {}
        if not ops:
            return ("None: every computation must run in your own kernels. The Verifier "
                    "rejects a PyTorch op the reference uses for the same work, or one that "
                    "computes the same function (`clamp_min` or `hardtanh` for a relu, `addmm` "
                    "for a linear), however it is called.")
        listed = ", ".join(f"`{op}` ({kind})" for op, kind in ops.items())
        lines = [f"The built-in plan of this module leaves these ops to PyTorch, so the "
                 f"Verifier allows exactly these PyTorch calls here and no others: {listed}."]
        if self.allowance is not None and self.allowance.calls:
            lines.append("Call them as " + ", ".join(
                f"`{call}(...)`" for call in self.allowance.calls) + ".")
        lines.append("Every other computation must run in your own kernels, even where the plan "
                     "above keeps it as a library call.")
        return " ".join(lines)

    def _task_message(self) -> str:
        # The plan may come from the model: each text and the whole are bounded (limits.py),
        # so a flood in one reply never reaches this prompt in full.
        steps = "\n".join(f"{k}. {clip(render_step_markdown(s), MAX_NOTE_CHARS)}"
                          + (f"\n   spec: `{json.dumps(s.spec)[:800]}`" if s.spec else "")
                          for k, s in enumerate(self.plan.steps, start=1))
        if self.plan.notes:
            steps += "\n\nNotes:\n" + "\n".join(f"- {clip(n, MAX_NOTE_CHARS)}"
                                                  for n in self.plan.notes)
        steps = clip(steps, MAX_PLAN_CHARS)
        h = self.plan.host
        reasons = clip("; ".join(h.reasons), MAX_NOTE_CHARS)
        host = (f"CUDA graph {'on' if h.cuda_graph else 'off'}, channels_last "
                f"{'on' if h.channels_last else 'off'}, preallocated outputs "
                f"{'on' if h.preallocate_outputs else 'off'}"
                + (", cuDNN autotuning (cudnn.benchmark) on" if h.cudnn_benchmark else "")
                + (f" ({reasons})" if reasons else "")
                + precision_text(self.precision))
        if self.seed_source:
            seed_text = (f"{self.seed_note}\n\n```python\n{compact_seed(self.seed_source)}```")
        else:
            seed_text = self.seed_note
        total = len(self.tasks)
        task = (f"Task 1 of {total}: {self.tasks[0]}. Later tasks follow one by one."
                if total > 1 else f"{self.tasks[0][0].upper()}{self.tasks[0][1:]}.")
        task += " Reply with the complete file in one ```python block."
        return self.prompts.render(
            "coder_task", module=self.module, source_name=self.source_name,
            source=self.reference_source, plan_origin=self.plan_origin, plan_steps=steps,
            host=host, seed_text=seed_text, baseline=self.baseline, task=task,
            allowed_ops=self._allowed_ops_text())

    def _feedback(self, iteration: int, feedback: str, instruction: str) -> str:
        return self.prompts.render("coder_feedback", iteration=iteration,
                                   max_iterations=self.max_iterations,
                                   feedback=clip(feedback, MAX_FEEDBACK_CHARS),
                                   instruction=instruction)

    # ---- the loop -----------------------------------------------------------------------------

    def run(self) -> CoderResult:
        result = CoderResult()
        base = [{"role": "system", "content": self.prompts.render("coder_system")},
                {"role": "user", "content": self._task_message()}]
        tail: list[dict[str, str]] = []
        task_index = 0  # the task being implemented; len(self.tasks): all in place
        for iteration in range(1, self.max_iterations + 1):
            remaining = self.client.remaining_s()
            if remaining is not None and remaining < MIN_ITERATION_S:
                result.stop_reason = "the LLM time budget is spent"
                break
            in_tasks = task_index < len(self.tasks)
            label = f"task {task_index + 1}/{len(self.tasks)}" if in_tasks else "feedback"
            self.progress("coding", f"LLM coder: reply {iteration}/{self.max_iterations} "
                                    f"({label})")
            try:
                reply = self.client.chat(base + tail, purpose="coder", label=f"coder-{iteration}")
            except LlmCancelled:
                raise
            except LlmBudgetExceeded as exc:
                result.stop_reason = str(exc)
                break
            except LlmError as exc:
                result.error = str(exc)
                result.stop_reason = f"LLM error: {exc}"
                break
            attempt = Attempt(iteration, label, "malformed", "", finish_reason=reply.finish_reason)
            result.attempts.append(attempt)
            last_task = task_index >= len(self.tasks) - 1
            try:
                feedback, instruction = self._evaluate(attempt, reply, result, last_task)
            finally:
                self.on_attempt(attempt)
            if attempt.outcome == "step_done":
                task_index += 1
                tail = [{"role": "assistant", "content": reply.text},
                        {"role": "user", "content": self.prompts.render(
                            "coder_step", index=task_index + 1, total=len(self.tasks),
                            step=self.tasks[task_index])}]
                continue
            if attempt.outcome not in ("malformed", "static_rejected"):
                task_index = len(self.tasks)  # verified: from now on, feedback rounds
            if feedback is None:  # nothing more to learn (no verdict possible)
                break
            tail = [{"role": "assistant", "content": reply.text},
                    {"role": "user", "content": self._feedback(iteration, feedback,
                                                               instruction)}]
        else:
            result.stop_reason = f"used all {self.max_iterations} replies"
        if not result.stop_reason:
            result.stop_reason = "done"
        return result

    def _evaluate(self, attempt: Attempt, reply: Any, result: CoderResult,
                  last_task: bool) -> tuple[str | None, str]:
        """Fill `attempt`; (feedback for the next message or None to stop, instruction)."""
        fix = "Fix the cause and reply with the complete corrected file in one ```python block."
        try:
            if reply.refused:  # too long: a failed reply, answered with the reason
                raise LlmReplyError(reply.refused)
            code = extract_python(reply.text, reply.finish_reason,
                                  reply.usage.get("completion_tokens"))
        except LlmReplyError as exc:
            attempt.outcome, attempt.message = "malformed", clip(str(exc), MAX_ERROR_CHARS)
            self.progress("coding", f"LLM coder: unusable reply: {str(exc)[:140]}")
            return f"Your reply could not be used: {exc}.", fix
        attempt.source = code
        path = self.out_dir / f"attempt-{attempt.index}" / "model_new.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
        attempt.path = str(path)
        static = check_source(code, self.reference_source, self.module,
                              allowance=self.allowance)
        if static.rejected:
            attempt.outcome = "static_rejected"
            attempt.message = "; ".join(f"{r.code}" + (f" (line {r.line})" if r.line else "")
                                        for r in static.reasons)
            attempt.verdict = Verdict(
                "rejected", list(static.reasons), notes=list(static.notes),
                torch_op_allowance=(self.allowance.to_json() if self.allowance is not None
                                    else None))
            self.progress("verifying", f"LLM candidate {attempt.index}: rejected by the static "
                                       f"checks ({attempt.message})")
            return format_reasons(static.reasons, code, "The Verifier's static checks REJECTED "
                                  "the file (nothing was run):"), fix
        if attempt.task.startswith("task") and not last_task:
            attempt.outcome, attempt.message = "step_done", "passed the static checks"
            return None, ""
        result.last_checked = attempt
        if self.verify is None:
            attempt.outcome = "unverified"
            attempt.message = "passed the static checks; verification is off"
            result.stop_reason = "verification is off: LLM candidates cannot be judged"
            return None, ""
        self.progress("verifying", f"LLM candidate {attempt.index}: verifying")
        try:
            verdict = self.verify(path)
        except Exception as exc:  # noqa: BLE001 - a Verifier failure is no verdict
            cancel = getattr(self.client, "cancel", None)
            if cancel is not None and cancel.is_set():
                raise  # the pipeline's cancellation (its progress callback raises it)
            redact = getattr(self.client, "redact", str)
            verdict = Verdict("could_not_verify", [Reason(
                "verifier_error",
                redact(f"the Verifier failed: {type(exc).__name__}: {exc}")[:1000])])
        attempt.verdict = verdict
        if verdict.status != "accepted" and verdict.status != "rejected":
            # could_not_verify (or a status this loop does not know): never an acceptance
            if "cancelled" in verdict.codes():
                raise LlmCancelled("cancelled while verifying an LLM candidate")
            why = verdict.reasons[0].message if verdict.reasons else "could not verify"
            attempt.outcome, attempt.message = "could_not_verify", why
            result.stop_reason = (f"the Verifier could not verify the LLM candidate ({why}); "
                                  "without a verdict there is nothing to improve on")
            return None, ""
        if verdict.status == "rejected":
            attempt.outcome = "rejected"
            attempt.message = "; ".join(f"{r.code}" + (f" (line {r.line})" if r.line else "")
                                        for r in verdict.reasons)
            self.progress("verifying", f"LLM candidate {attempt.index}: rejected "
                                       f"({attempt.message})")
            return format_reasons(verdict.reasons, code, "The Verifier REJECTED the file:"), fix
        attempt.outcome = "accepted"
        attempt.message = "accepted" + (f", {timings_text(verdict)}" if verdict.timings else "")
        self.progress("verifying", f"LLM candidate {attempt.index}: {attempt.message}")
        best = result.best
        if best is None or (attempt.candidate_ms is not None and (
                best.candidate_ms is None or attempt.candidate_ms < best.candidate_ms)):
            result.best = attempt
        return self._speed_feedback(attempt, result), (
            "Make it faster without breaking any rule (less memory traffic, better occupancy, "
            "vectorised loads, fewer launches), and reply with the complete file in one "
            "```python block.")

    def _speed_feedback(self, attempt: Attempt, result: CoderResult) -> str:
        verdict = attempt.verdict
        assert verdict is not None
        lines = [f"The Verifier ACCEPTED the file: {timings_text(verdict)}."]
        best = result.best
        if best is not None and best is not attempt and best.candidate_ms is not None:
            lines.append(f"Your best accepted file so far (reply {best.index}) takes "
                         f"{best.candidate_ms:.4f} ms.")
        if self.builtin_ms is not None:
            lines.append(f"The built-in compiler's candidate takes {self.builtin_ms:.4f} ms; "
                         "yours is used only if it is faster.")
        if self.profile is not None and attempt.path:
            try:
                found = self.profile(Path(attempt.path))
            except Exception as exc:  # noqa: BLE001 - profiling is advisory
                found = None
                lines.append(f"(profiling the candidate failed: {exc})")
            if found:
                lines.append("Profile of your file:\n" + profile_text(found))
        return "\n".join(lines)

