"""The Plan: what the Coder must build, step by step.  Shared by the built-in planner and the LLM
planner; torch-free (the language server renders plans in hovers).

A step covers graph nodes (by name) with one technique.  Kernel steps carry their codegen spec
as JSON (`spec`, see `kernelstitch.agents.plan.kernel_spec`) and name the values they read
(`inputs`, in kernel argument order) and produce (`outputs`); values are graph node names, or
names of synthetic nodes a rewrite introduced (listed in `Plan.graph_edits`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args

from kernelstitch.agents.plan.graph import Graph, GraphEdit
from kernelstitch.agents.plan.kernel_spec import ReductionKnobs, Spec, spec_from_json

from kernelstitch.core.precision import PrecisionError, precision_mode

SCHEMA_VERSION = 1
Technique = Literal[
    "fused_elementwise", "fused_reduction", "gemm_epilogue", "library_call",
    "pytorch_fallback", "algebraic_rewrite", "fused_attention", "fused_recurrent", "fused_convolution",
]
TECHNIQUES: tuple[str, ...] = get_args(Technique)
# Steps that run a kernel the candidate compiles itself (the rest call PyTorch).
KERNEL_TECHNIQUES = frozenset({"fused_elementwise", "fused_reduction", "gemm_epilogue",
                               "algebraic_rewrite", "fused_attention", "fused_recurrent", "fused_convolution"})


class PlanError(ValueError):
    """A plan (usually its JSON, e.g. from an LLM) is malformed; the message says where."""


@dataclass
class PlanStep:
    id: str
    technique: Technique
    nodes: list[str]
    description: str
    source_lines: list[int] = field(default_factory=list)
    spec: dict[str, Any] | None = None
    estimated_bytes: int = 0
    estimated_flops: int = 0
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    # A library call run on a channels-last (NHWC) copy of its first input (cuDNN's faster
    # kernels); the planner decides it, the coder only spells it out.
    channels_last: bool = False
    # A reduction kernel's design knobs, when the search varies them (None: the coder's
    # defaults); only fused_reduction steps carry them.
    reduction_knobs: ReductionKnobs | None = None

    @property
    def is_kernel(self) -> bool:
        return self.technique in KERNEL_TECHNIQUES

    def kernel_spec(self) -> Spec:
        """The typed codegen spec of a kernel step (PlanError when it is missing or malformed)."""
        if not self.spec:
            raise PlanError(f"step {self.id}: no kernel spec")
        try:
            return spec_from_json(self.spec)
        except (ValueError, KeyError, TypeError) as exc:
            raise PlanError(f"step {self.id}: bad kernel spec ({exc})") from exc


@dataclass
class HostSettings:
    cuda_graph: bool = False
    channels_last: bool = False
    preallocate_outputs: bool = False
    # cuDNN times its convolution algorithms per shape (torch.backends.cudnn.benchmark) during
    # forward: a measured alternative only (planner/variants.py autotune_variant)
    cudnn_benchmark: bool = False
    # The precision the user allowed (kernelstitch.core.precision): forward holds torch's matching
    # settings for the library calls it makes, and the GEMM specs carry it; "fp32" is strict.
    precision: str = "fp32"
    reasons: list[str] = field(default_factory=list)


@dataclass
class Plan:
    module: str
    source_path: str
    steps: list[PlanStep]
    host: HostSettings = field(default_factory=HostSettings)
    notes: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    graph_edits: list[dict[str, Any]] = field(default_factory=list)  # GraphEdit JSON
    # The graph the steps' node names refer to: the captured graph with `graph_edits` applied
    # (set by `bind`; not part of the JSON, which names the nodes instead).
    graph: Graph | None = field(default=None, compare=False, repr=False)

    def bind(self, captured: Graph) -> Plan:
        """This plan over `captured` plus its own rewrites (what the coder reads node names in)."""
        edits = [GraphEdit.from_json(e) for e in self.graph_edits]
        return replace(self, graph=captured.with_edits(edits) if edits else captured)

    def step(self, step_id: str) -> PlanStep:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise PlanError(f"no step {step_id!r}")

    @property
    def estimated_bytes(self) -> int:
        return sum(s.estimated_bytes for s in self.steps)

    @property
    def estimated_flops(self) -> int:
        return sum(s.estimated_flops for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "graph"}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """Validate and build; raises PlanError naming the offending field."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise PlanError(f"plan is not valid JSON: {exc}") from None
        obj = _Obj(data, "plan")
        version = obj.get("schema_version", int, default=SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise PlanError(f"plan.schema_version: {version} is not supported (expected "
                            f"{SCHEMA_VERSION})")
        steps = [_step_from_json(s, f"plan.steps[{k}]")
                 for k, s in enumerate(obj.get("steps", list))]
        seen: set[str] = set()
        for k, s in enumerate(steps):
            if s.id in seen:
                raise PlanError(f"plan.steps[{k}].id: duplicate step id {s.id!r}")
            seen.add(s.id)
        host_obj = _Obj(obj.get("host", dict, default={}), "plan.host")
        host = HostSettings(
            cuda_graph=host_obj.get("cuda_graph", bool, default=False),
            channels_last=host_obj.get("channels_last", bool, default=False),
            preallocate_outputs=host_obj.get("preallocate_outputs", bool, default=False),
            cudnn_benchmark=host_obj.get("cudnn_benchmark", bool, default=False),
            precision=_precision(host_obj.get("precision", str, default="fp32")),
            reasons=_str_list(host_obj.get("reasons", list, default=[]), "plan.host.reasons"),
        )
        edits = obj.get("graph_edits", list, default=[])
        for k, e in enumerate(edits):
            if not isinstance(e, dict) or "node" not in e:
                raise PlanError(f"plan.graph_edits[{k}]: expected an object with 'node'")
        return cls(
            module=obj.get("module", str),
            source_path=obj.get("source_path", str),
            steps=steps,
            host=host,
            notes=_str_list(obj.get("notes", list, default=[]), "plan.notes"),
            schema_version=version,
            graph_edits=list(edits),
        )


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return value


class _Obj:
    """Typed field access with precise error paths."""

    _MISSING = object()

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise PlanError(f"{where}: expected an object, got {type(data).__name__}")
        self.data, self.where = data, where

    def get(self, key: str, kind: type, default: Any = _MISSING) -> Any:
        if key not in self.data:
            if default is self._MISSING:
                raise PlanError(f"{self.where}.{key}: missing")
            return default
        value = self.data[key]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise PlanError(f"{self.where}.{key}: expected an integer, got {value!r}")
        if kind is not int and not isinstance(value, kind):
            expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise PlanError(f"{self.where}.{key}: expected {expected}, got "
                            f"{type(value).__name__} {value!r}")
        return value


def _str_list(values: list[Any], where: str) -> list[str]:
    for k, v in enumerate(values):
        if not isinstance(v, str):
            raise PlanError(f"{where}[{k}]: expected a string, got {v!r}")
    return list(values)


def _step_from_json(data: Any, where: str) -> PlanStep:
    obj = _Obj(data, where)
    technique = obj.get("technique", str)
    if technique not in TECHNIQUES:
        raise PlanError(f"{where}.technique: {technique!r} is not one of {list(TECHNIQUES)}")
    nodes = _str_list(obj.get("nodes", list), f"{where}.nodes")
    if not nodes:
        raise PlanError(f"{where}.nodes: a step must cover at least one graph node")
    lines = obj.get("source_lines", list, default=[])
    for k, line in enumerate(lines):
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            raise PlanError(f"{where}.source_lines[{k}]: expected a 1-based line, got {line!r}")
    spec = obj.get("spec", (dict, type(None)), default=None)
    if technique in KERNEL_TECHNIQUES and spec is None:
        raise PlanError(f"{where}.spec: a {technique} step needs its kernel spec")
    step_id = obj.get("id", str)
    if not step_id:
        raise PlanError(f"{where}.id: empty")
    estimates = {}
    for key in ("estimated_bytes", "estimated_flops"):
        value = obj.get(key, int, default=0)
        if value < 0:
            raise PlanError(f"{where}.{key}: negative ({value})")
        estimates[key] = value
    return PlanStep(
        id=step_id,
        technique=technique,
        nodes=nodes,
        description=obj.get("description", str, default=""),
        source_lines=list(lines),
        spec=spec,
        inputs=_str_list(obj.get("inputs", list, default=[]), f"{where}.inputs"),
        outputs=_str_list(obj.get("outputs", list, default=[]), f"{where}.outputs"),
        channels_last=obj.get("channels_last", bool, default=False),
        reduction_knobs=_knobs(obj.get("reduction_knobs", (dict, type(None)), default=None),
                               technique, where),
        **estimates,
    )


def _knobs(data: dict[str, Any] | None, technique: str, where: str) -> ReductionKnobs | None:
    if data is None:
        return None
    if technique != "fused_reduction":
        raise PlanError(f"{where}.reduction_knobs: only fused_reduction steps have them")
    try:
        return ReductionKnobs.from_json(data)
    except ValueError as exc:
        raise PlanError(f"{where}.reduction_knobs: {exc}") from exc


# ---- rendering --------------------------------------------------------------------------------

_TECHNIQUE_LABEL = {
    "fused_elementwise": "fused elementwise kernel",
    "fused_reduction": "fused reduction kernel",
    "gemm_epilogue": "GEMM + fused epilogue (cuBLASLt)",
    "library_call": "library call (PyTorch)",
    "pytorch_fallback": "PyTorch fallback",
    "algebraic_rewrite": "algebraic rewrite",
    "fused_attention": "flash attention kernel",
    "fused_recurrent": "persistent recurrent kernel",
    "fused_convolution": "direct convolution + fused epilogue",
}


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def human_flops(n: int) -> str:
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} FLOP"


def render_step_markdown(step: PlanStep) -> str:
    lines = ", ".join(str(x) for x in step.source_lines) or "-"
    return (f"**{step.id}** ({_TECHNIQUE_LABEL.get(step.technique, step.technique)}, "
            f"line {lines}): {step.description} "
            f"(~{human_bytes(step.estimated_bytes)}, {human_flops(step.estimated_flops)})")


def _precision(name: str) -> str:
    try:
        return precision_mode(name).name
    except PrecisionError as exc:
        raise PlanError(f"plan.host.precision: {exc}") from None


def render_plan_markdown(plan: Plan | dict[str, Any]) -> str:
    """Markdown table of the steps, host settings with their reasons, and notes."""
    if isinstance(plan, dict):
        plan = Plan.from_json(plan)
    out = [
        (f"Plan for `{plan.module}`: {len(plan.steps)} step(s), "
         f"~{human_bytes(plan.estimated_bytes)} moved, {human_flops(plan.estimated_flops)}."),
        "",
        "| # | step | technique | lines | covers | est. bytes | est. FLOPs |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, s in enumerate(plan.steps, start=1):
        lines = ", ".join(str(x) for x in s.source_lines) or "-"
        covers = ", ".join(f"`{n}`" for n in s.nodes[:6]) + (" ..." if len(s.nodes) > 6 else "")
        desc = s.description.replace("|", "\\|")
        out.append(f"| {k} | {desc} | {_TECHNIQUE_LABEL.get(s.technique, s.technique)} | "
                   f"{lines} | {covers} | {human_bytes(s.estimated_bytes)} | "
                   f"{human_flops(s.estimated_flops)} |")
    h = plan.host
    out += ["", ("Host settings: "
                 f"CUDA graph {'on' if h.cuda_graph else 'off'}, "
                 f"channels_last {'on' if h.channels_last else 'off'}, "
                 f"preallocated outputs {'on' if h.preallocate_outputs else 'off'}"
                 + (", cuDNN autotuning on" if h.cudnn_benchmark else "")
                 + (f", precision {precision_mode(h.precision).summary()}" if h.precision != "fp32"
                    else "") + ".")]
    out += [f"- {r}" for r in h.reasons]
    if plan.notes:
        out += ["", "Notes:"] + [f"- {n}" for n in plan.notes]
    return "\n".join(out)
