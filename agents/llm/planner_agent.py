"""The LLM Planner: source + graph + built-in plan + baseline profile -> a validated `Plan`.

The model answers with JSON; `validate_plan` checks it with `Plan.from_json` (types, techniques,
specs, unique ids) and against the graph (every node named exists, every call node of the graph
is covered by exactly one step).  An invalid answer is sent back with the validation error, up
to `attempts` replies; after that the caller keeps the built-in plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelstitch.agents.llm.errors import LlmReplyError
from kernelstitch.agents.llm.extract import extract_json
from kernelstitch.agents.llm.limits import MAX_ERROR_CHARS, clip
from kernelstitch.agents.plan import Plan, PlanError
from kernelstitch.agents.plan.graph import (
    DTypeConst,
    Graph,
    GraphError,
    NodeRef,
    OpaqueConst,
)

MAX_GRAPH_LINES = 400
MAX_PROFILE_KERNELS = 12


@dataclass
class PlannerResult:
    plan: Plan | None  # None: every reply was invalid (the caller keeps the built-in plan)
    replies: int = 0
    errors: list[str] = field(default_factory=list)  # one per rejected reply


# ---- what the model sees ----------------------------------------------------------------------

def _value_text(value: Any) -> str:
    if isinstance(value, NodeRef):
        return value.node
    if isinstance(value, DTypeConst):
        return value.name
    if isinstance(value, OpaqueConst):
        return value.text
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return repr(value)


def graph_text(graph: Graph) -> str:
    """One line per node: `name = op(args) -> dtype[shape] (example [..]) @ line N`."""
    lines = []
    for node in graph.nodes:
        meta = node.meta
        shape = ""
        if meta is not None:
            dims = ", ".join(str(d) for d in meta.shape)
            shape = f"{meta.dtype}[{dims}]"
            if list(meta.shape) != list(meta.example_shape):
                shape += f" (example {list(meta.example_shape)})"
        if node.placeholder is not None:
            p = node.placeholder
            what = p.kind + (f" {p.target!r}" if p.target else "") + (
                f" #{p.index}" if p.index is not None else "")
            lines.append(f"{node.name}: {what} {shape}".rstrip())
            continue
        args = [_value_text(a) for a in node.args]
        args += [f"{k}={_value_text(v)}" for k, v in node.kwargs.items()]
        where = f" @ line {node.line}" if node.line else ""
        result = f" -> {shape}" if shape else ""
        lines.append(f"{node.name} = {node.op}({', '.join(args)}){result}{where}")
    outputs = ", ".join(_value_text(v) for v in graph.outputs)
    lines.append(f"return {'(' + outputs + ')' if graph.output_is_tuple else outputs}")
    if len(lines) > MAX_GRAPH_LINES:
        cut = len(lines) - MAX_GRAPH_LINES
        lines = lines[:MAX_GRAPH_LINES - 1] + [f"... {cut} more nodes omitted", lines[-1]]
    return "\n".join(lines)


def profile_text(profile: dict[str, Any] | None) -> str:
    """The baseline profile's kernels and findings (tied to source lines), or a placeholder."""
    if not profile:
        return "No profile available (run `kernelstitch profile` on a GPU machine to add one)."
    out = []
    device = profile.get("device")
    forward = profile.get("forward_ms")
    if device or forward:
        out.append(f"Device {device or '?'}; forward {forward:.4f} ms per call." if forward
                   else f"Device {device}.")
    kernels = sorted(profile.get("kernels", []), key=lambda k: -float(k.get("total_us", 0)))
    if kernels:
        out.append("Kernels (slowest first):")
        for k in kernels[:MAX_PROFILE_KERNELS]:
            line = f" (line {k['source_line']})" if k.get("source_line") else ""
            out.append(f"- {k.get('name', '?')[:120]}: {float(k.get('total_us', 0)):.1f} us, "
                       f"{k.get('calls', 1)} call(s){line}")
    findings = profile.get("findings", [])
    if findings:
        out.append("Findings:")
        for f in findings:
            line = f"line {f['source_line']}: " if f.get("source_line") else ""
            out.append(f"- [{f.get('severity', '')}] {line}{f.get('message', '')} "
                       f"Suggestion: {f.get('suggestion', '')}".rstrip())
    return "\n".join(out) or "The profile holds no kernels."


# ---- validation -------------------------------------------------------------------------------

def validate_plan(data: Any, graph: Graph) -> Plan:
    """A Plan from the model's JSON, checked against the graph; PlanError says what is wrong."""
    if not isinstance(data, dict):
        raise PlanError(f"expected a JSON object with 'steps', got {type(data).__name__}")
    data = {**data, "module": graph.module, "source_path": graph.source_path}
    data.setdefault("schema_version", 1)
    plan = Plan.from_json(data)
    if not plan.steps:
        raise PlanError("plan.steps: empty; every call node of the graph needs a step")
    try:
        plan = plan.bind(graph)
        full = plan.graph
    except (GraphError, KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"plan.graph_edits: {exc} (leave graph_edits out; describe rewrites in "
                        "the step's description and spec)") from None
    owner: dict[str, str] = {}
    for k, step in enumerate(plan.steps):
        unknown = [n for n in step.nodes if not full.has(n)]
        if unknown:
            raise PlanError(f"plan.steps[{k}].nodes: {unknown} are not graph nodes (use the "
                            "names on the left of the graph listing)")
        for n in step.nodes:
            if n in owner:
                raise PlanError(f"plan.steps[{k}].nodes: {n!r} is already computed by step "
                                f"{owner[n]!r}; each node belongs to exactly one step")
            owner[n] = step.id
        for key in ("inputs", "outputs"):
            bad = [v for v in getattr(step, key) if not full.has(v)]
            if bad:
                raise PlanError(f"plan.steps[{k}].{key}: {bad} are not graph nodes")
    missing = [n.name for n in graph.calls() if n.name not in owner]
    if missing:
        shown = ", ".join(missing[:12]) + (" ..." if len(missing) > 12 else "")
        raise PlanError(f"the call nodes {shown} are covered by no step; every call node of "
                        "the graph belongs to exactly one step")
    return plan


# ---- the agent ---------------------------------------------------------------------------------

def plan_with_llm(
    client: Any,
    prompts: Any,
    *,
    graph: Graph,
    source_text: str,
    source_name: str,
    builtin_plan: Plan | None,
    profile: dict[str, Any] | None = None,
    attempts: int = 3,
    progress: Callable[[str], None] | None = None,
) -> PlannerResult:
    """Ask, validate, retry with the error.  Transport errors (LlmError) propagate."""
    report = progress or (lambda _m: None)
    builtin_json = (json.dumps(_compact_plan(builtin_plan), indent=1) if builtin_plan
                    else "(the built-in compiler could not plan this module)")
    messages = [
        {"role": "system", "content": prompts.render("planner_system")},
        {"role": "user", "content": prompts.render(
            "planner_task", module=graph.module, source_name=source_name, source=source_text,
            graph=graph_text(graph), builtin_plan=builtin_json, profile=profile_text(profile))},
    ]
    result = PlannerResult(plan=None)
    for attempt in range(1, attempts + 1):
        report(f"LLM planner: request {attempt}/{attempts}")
        reply = client.chat(messages, purpose="planner", label=f"planner-{attempt}",
                            json_mode=True)
        result.replies += 1
        try:
            if reply.refused:  # too long: a failed reply, retried with the reason
                raise LlmReplyError(reply.refused)
            data = extract_json(reply.text, reply.finish_reason)
            result.plan = validate_plan(data, graph)
            return result
        except (LlmReplyError, PlanError) as exc:
            error = clip(str(exc), MAX_ERROR_CHARS)  # it may quote the reply
            result.errors.append(error)
            report(f"LLM planner: invalid plan ({error[:120]})")
            messages = messages[:2] + [
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": prompts.render("planner_retry", error=error)},
            ]
    return result


def _compact_plan(plan: Plan) -> dict[str, Any]:
    """The built-in plan without the fields the model cannot use (paths, estimates noise)."""
    data = plan.to_json()
    data.pop("source_path", None)
    data.pop("schema_version", None)
    if not data.get("graph_edits"):
        data.pop("graph_edits", None)
    return data
