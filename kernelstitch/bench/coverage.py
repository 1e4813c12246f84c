"""Coverage of the built-in planner over a bench folder: which ops its plans leave to PyTorch.

For each problem (`problems.discover`: a folder of `*.py` files or KernelBench's level folders)
the module's forward is captured in a fresh worker process (the pipeline's task
`kernelstitch.agents.planner.capture_task:capture_graph`, with a timeout: some captures segfault
or hang, and that must cost one problem, not the run), then planned here with `plan_builtin`
(pure Python over the captured graph).  Nothing is compiled or run on a GPU.

Recorded per problem: planned, or the failure (stage capture/plan, the worker's error kind and
the message's first line, and a `cause` that groups similar failures); for a plan, each
`pytorch_fallback` and `library_call` step's op.  The summary counts per level: problems, plans,
failures by cause, plans keeping a fallback step, plans of fallback steps only, and the
fallback ops / library calls with (steps, problems) counts.

    kernelstitch bench-coverage ../shared/kernelbench --jobs 2 --out coverage.json --markdown c.md
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.bench.problems import ProblemSpec, discover

CAPTURE_TASK = "kernelstitch.agents.planner.capture_task:capture_graph"
DEFAULT_TIMEOUT_S = 120.0
SCHEMA = "kernelstitch.bench-coverage/1"
ALL = "all"


@dataclass
class ProblemCoverage:
    name: str
    level: str | None
    path: str
    status: str  # "planned" | "capture_failed" | "plan_failed"
    seconds: float = 0.0
    error: dict[str, Any] | None = None  # {"stage", "kind", "message", "cause"}
    steps: int = 0
    techniques: dict[str, int] = field(default_factory=dict)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)  # {"step", "op", "aten", ...}
    library_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def planned(self) -> bool:
        return self.status == "planned"

    @property
    def fallback_only(self) -> bool:
        return self.planned and self.steps > 0 and len(self.fallbacks) == self.steps

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "path": self.path, "status": self.status,
                "seconds": round(self.seconds, 2), "error": self.error, "steps": self.steps,
                "techniques": self.techniques, "fallbacks": self.fallbacks,
                "library_calls": self.library_calls}


# ---- failures --------------------------------------------------------------------------------

_LINE_PREFIX = re.compile(r"^(?:[^:\s]*\.py:)?line \d+:\s*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")


def first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def failure_cause(kind: str, message: str, signal_name: str | None = None) -> str:
    """A key that groups failures of one cause: the worker's error kind (a crash with its
    signal), and for exceptions the innermost exception's type and message with the problem's
    own words (line numbers, quoted names, numbers) blanked."""
    if kind == "crash":
        return f"crash ({signal_name})" if signal_name else "crash"
    if kind in ("timeout", "startup", "protocol", "cancelled"):
        return kind
    line = _LINE_PREFIX.sub("", first_line(message))
    # "...could not trace M.forward: TypeError: msg" -> the last "Type: msg" part is the cause
    parts = re.split(r":\s+(?=[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b)", line)
    cause = parts[-1] if len(parts) > 1 else line
    cause = _NUMBER.sub("N", _QUOTED.sub("'…'", cause))
    cause = cause if len(cause) <= 120 else cause[:119] + "…"
    return f"{kind}: {cause}" if kind != "exception" else cause


def _error(stage: str, kind: str, message: str, signal_name: str | None = None) -> dict[str, Any]:
    return {"stage": stage, "kind": kind, "message": first_line(message)[:500],
            "signal": signal_name, "cause": failure_cause(kind, message, signal_name)}


# ---- one problem -----------------------------------------------------------------------------

def _torch_step(step) -> dict[str, Any]:
    from kernelstitch.agents.planner.ops import base_op

    spec = step.spec or {}
    aten = str(spec.get("op") or "")
    if not aten and step.nodes:
        aten = step.nodes[0]
    return {"step": step.id, "op": base_op(aten) if aten else "?", "aten": aten,
            "nodes": list(step.nodes), "description": step.description}


def summarise_plan(result: ProblemCoverage, plan) -> ProblemCoverage:
    result.steps = len(plan.steps)
    result.techniques = dict(Counter(s.technique for s in plan.steps))
    result.fallbacks = [_torch_step(s) for s in plan.steps if s.technique == "pytorch_fallback"]
    result.library_calls = [_torch_step(s) for s in plan.steps if s.technique == "library_call"]
    return result


def capture_in_worker(path: Path, module: str | None, timeout_s: float = DEFAULT_TIMEOUT_S):
    """The problem file's captured graph (JSON) from a fresh worker, or the worker's error: a
    capture imports the problem's file and may crash its process.  A WorkerResponse."""
    from kernelstitch.core.worker.client import WorkerClient

    with WorkerClient(env={"CUDA_VISIBLE_DEVICES": ""}) as worker:
        return worker.call(CAPTURE_TASK, {"path": str(path), "module": module}, timeout_s=timeout_s)


def cover_problem(spec: ProblemSpec, timeout_s: float = DEFAULT_TIMEOUT_S,
                  root: Path | None = None) -> ProblemCoverage:
    """Capture `spec` in a fresh worker, plan it here; every failure becomes the result."""
    from kernelstitch.agents.plan.graph import Graph
    from kernelstitch.agents.planner.builtin import plan_builtin

    start = time.monotonic()
    path = spec.path
    shown = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
    result = ProblemCoverage(spec.name, spec.level, shown, "capture_failed")
    try:
        response = capture_in_worker(path, spec.module, timeout_s)
        if not response.ok:
            err = response.error
            result.error = _error("capture", err.kind, err.message, err.signal_name)
            return result
        try:
            graph = Graph.from_json(response.result)
            plan = plan_builtin(graph)
        except Exception as exc:  # noqa: BLE001 - a planner failure is this problem's result
            result.status = "plan_failed"
            result.error = _error("plan", "exception", f"{type(exc).__name__}: {exc}")
            return result
        result.status = "planned"
        return summarise_plan(result, plan)
    finally:
        result.seconds = time.monotonic() - start


# ---- the run ---------------------------------------------------------------------------------

def run_coverage(directory: Path, levels: list[str] | None = None, jobs: int = 2,
                 timeout_s: float = DEFAULT_TIMEOUT_S, only: list[str] | None = None,
                 progress: Callable[[int, int, ProblemCoverage], None] | None = None,
                 ) -> list[ProblemCoverage]:
    """Every problem of `directory`, `jobs` captures at a time (each in its own worker
    process; the threads here only wait on them and plan).  Results in discovery order."""
    specs = discover(directory, levels, only)
    root = Path(directory).resolve()
    results: list[ProblemCoverage | None] = [None] * len(specs)
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(cover_problem, spec, timeout_s, root): i
                   for i, spec in enumerate(specs)}
        for future in as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            done += 1
            if progress:
                progress(done, len(specs), results[index])
    return [r for r in results if r is not None]


# ---- summary ---------------------------------------------------------------------------------

def _level_key(level: str) -> tuple[int, Any]:
    if level == ALL:
        return (2, 0)
    return (0, int(level)) if level.isdigit() else (1, level)


def _op_table(results: list[ProblemCoverage], attr: str) -> list[dict[str, Any]]:
    steps: Counter[str] = Counter()
    problems: dict[str, set[str]] = defaultdict(set)
    for r in results:
        for entry in getattr(r, attr):
            steps[entry["op"]] += 1
            problems[entry["op"]].add(r.name)
    rows = [{"op": op, "steps": steps[op], "problems": len(problems[op]),
             "examples": sorted(problems[op])[:3]} for op in steps]
    return sorted(rows, key=lambda row: (-row["problems"], -row["steps"], row["op"]))


def summarise(results: list[ProblemCoverage]) -> dict[str, dict[str, Any]]:
    """level ("1", "2", ..., "-" for problems outside a level folder, and "all") -> counts."""
    by_level: dict[str, list[ProblemCoverage]] = defaultdict(list)
    for r in results:
        by_level[r.level or "-"].append(r)
    if len(by_level) > 1 or not by_level:
        by_level[ALL] = list(results)
    summary: dict[str, dict[str, Any]] = {}
    for level in sorted(by_level, key=_level_key):
        rows = by_level[level]
        failed = [r for r in rows if r.status == "capture_failed"]
        causes: dict[str, list[str]] = defaultdict(list)
        for r in failed:
            causes[r.error["cause"]].append(r.name)
        summary[level] = {
            "problems": len(rows),
            "planned": sum(r.planned for r in rows),
            "capture_failed": len(failed),
            "plan_failed": sum(r.status == "plan_failed" for r in rows),
            "capture_failures": [
                {"cause": cause, "problems": len(names), "names": sorted(names)}
                for cause, names in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
            "plan_failures": [{"name": r.name, "message": r.error["message"]}
                              for r in rows if r.status == "plan_failed"],
            "with_fallback": sum(r.planned and bool(r.fallbacks) for r in rows),
            "fallback_only": sum(r.fallback_only for r in rows),
            "fallback_steps": sum(len(r.fallbacks) for r in rows),
            "library_call_steps": sum(len(r.library_calls) for r in rows),
            "fallback_ops": _op_table(rows, "fallbacks"),
            "library_ops": _op_table(rows, "library_calls"),
        }
    return summary


def report_json(results: list[ProblemCoverage], directory: Path, **meta: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "directory": str(directory), **meta,
            "summary": summarise(results), "problems": [r.to_json() for r in results]}


def _level_name(level: str) -> str:
    return {"-": "(no level)", ALL: "all"}.get(level, f"level {level}")


def render_markdown(summary: dict[str, dict[str, Any]]) -> str:
    levels = list(summary)
    out = ["| level | problems | planned | capture failures | plan failures "
           "| plans keeping >= 1 fallback step | plans of fallback steps only "
           "| fallback steps | library-call steps |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for level in levels:
        s = summary[level]
        out.append(f"| {_level_name(level)} | {s['problems']} | {s['planned']} "
                   f"| {s['capture_failed']} | {s['plan_failed']} | {s['with_fallback']} "
                   f"| {s['fallback_only']} | {s['fallback_steps']} "
                   f"| {s['library_call_steps']} |")
    failures = [(level, row) for level in levels if level != ALL
                for row in summary[level]["capture_failures"]]
    if failures:
        out += ["", "Capture failures by cause:", "",
                "| level | cause | problems | which |", "|---|---|---:|---|"]
        for level, row in failures:
            names = ", ".join(n.split("/")[-1] for n in row["names"])
            out.append(f"| {_level_name(level)} | {_cell(row['cause'])} | {row['problems']} "
                       f"| {_cell(names)} |")
    plan_failures = [(level, row) for level in levels if level != ALL
                     for row in summary[level]["plan_failures"]]
    if plan_failures:
        out += ["", "Plan failures:", "", "| level | problem | error |", "|---|---|---|"]
        for level, row in plan_failures:
            out.append(f"| {_level_name(level)} | {row['name']} | {_cell(row['message'])} |")
    for title, key in (("Ops left to PyTorch (`pytorch_fallback` steps)", "fallback_ops"),
                       ("Library calls (`library_call` steps)", "library_ops")):
        out += ["", f"{title}: steps / problems per level, sorted by problems over all levels:",
                ""]
        out += _op_matrix(summary, key)
    return "\n".join(out) + "\n"


def _op_matrix(summary: dict[str, dict[str, Any]], key: str) -> list[str]:
    levels = list(summary)
    cells: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for level in levels:
        for row in summary[level][key]:
            cells[row["op"]][level] = row
    if not cells:
        return ["(none)"]
    order_level = levels[-1]
    ops = sorted(cells, key=lambda op: (-cells[op].get(order_level, {}).get("problems", 0),
                                        -cells[op].get(order_level, {}).get("steps", 0), op))
    head = "| op | " + " | ".join(_level_name(level) for level in levels) + " |"
    lines = [head, "|---|" + "---:|" * len(levels)]
    for op in ops:
        row = [f"{cells[op][lv]['steps']} / {cells[op][lv]['problems']}" if lv in cells[op]
               else "" for lv in levels]
        lines.append(f"| `{op}` | " + " | ".join(row) + " |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_outputs(report: dict[str, Any], out: Path | None, markdown: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(render_markdown(report["summary"]), encoding="utf-8")
