"""`kernelstitch bench DIR`: the whole pipeline over a folder of KernelBench-format problems.

Metrics follow KernelBench: fast_p is the fraction of problems whose candidate is correct AND
faster than p x the baseline; speedups are geometric means over correct problems only.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.agents.job_protocol import JobResult, ProgressEvent

FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass
class ProblemOutcome:
    problem: str
    status: str  # accepted / rejected / could_not_verify / failed
    message: str
    reasons: list[str] = field(default_factory=list)
    eager_ms: float | None = None
    compiled_ms: float | None = None
    candidate_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compiled: float | None = None
    significant_vs_eager: bool | None = None
    plan_steps: list[str] = field(default_factory=list)

    @classmethod
    def from_result(cls, problem: str, result: JobResult) -> "ProblemOutcome":
        verdict = result.verdict or {}
        status = verdict.get("status", "failed" if result.status != "succeeded" else "unverified")
        timings = verdict.get("timings") or {}

        def median(key: str) -> float | None:
            stat = timings.get(key)
            return stat.get("median") if isinstance(stat, dict) else None

        steps = [f"{s.get('technique')}" for s in (result.plan or {}).get("steps", [])]
        return cls(
            problem=problem, status=status, message=result.message,
            reasons=[r.get("code", "?") for r in verdict.get("reasons", [])],
            eager_ms=median("eager_ms"), compiled_ms=median("compiled_ms"),
            candidate_ms=median("candidate_ms"),
            speedup_vs_eager=timings.get("speedup_vs_eager"),
            speedup_vs_compiled=timings.get("speedup_vs_compiled"),
            significant_vs_eager=timings.get("significant_vs_eager"),
            plan_steps=steps,
        )


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def fast_p(outcomes: list[ProblemOutcome], p: float, key: str) -> float:
    if not outcomes:
        return 0.0
    hits = sum(
        1 for o in outcomes
        if o.status == "accepted" and getattr(o, key) is not None and getattr(o, key) > p
    )
    return hits / len(outcomes)


def summarise(outcomes: list[ProblemOutcome]) -> dict[str, Any]:
    accepted = [o for o in outcomes if o.status == "accepted"]
    return {
        "problems": len(outcomes),
        "accepted": len(accepted),
        "correctness_rate": len(accepted) / len(outcomes) if outcomes else 0.0,
        "geomean_speedup_vs_eager": geomean([o.speedup_vs_eager for o in accepted]),
        "geomean_speedup_vs_compiled": geomean([o.speedup_vs_compiled for o in accepted]),
        "fast_p_vs_eager": {str(p): fast_p(outcomes, p, "speedup_vs_eager") for p in FAST_P},
        "fast_p_vs_compiled": {str(p): fast_p(outcomes, p, "speedup_vs_compiled") for p in FAST_P},
    }


def environment() -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(0)
    except ImportError:
        info["torch"] = None
    return info


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def render_markdown(outcomes: list[ProblemOutcome], summary: dict, env: dict, command: str) -> str:
    lines = [
        "# KernelStitch benchmark",
        "",
        f"- date: {env.get('date')}",
        f"- device: {env.get('device', 'no GPU')}; torch {env.get('torch')}, CUDA {env.get('cuda')}",
        f"- command: `{command}`",
        "",
        "| problem | verdict | eager ms | torch.compile ms | ours ms | vs eager | vs compile | plan |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        verdict = o.status if not o.reasons else f"{o.status} ({', '.join(o.reasons)})"
        lines.append(
            f"| {o.problem} | {verdict} | {_fmt(o.eager_ms)} | {_fmt(o.compiled_ms)} | "
            f"{_fmt(o.candidate_ms)} | {_fmt(o.speedup_vs_eager, '.2f')} | "
            f"{_fmt(o.speedup_vs_compiled, '.2f')} | {' + '.join(o.plan_steps)} |"
        )
    lines += [
        "",
        f"- correct: {summary['accepted']}/{summary['problems']}",
        f"- geomean speedup vs eager (correct only): {_fmt(summary['geomean_speedup_vs_eager'], '.2f')}",
        f"- geomean speedup vs torch.compile: {_fmt(summary['geomean_speedup_vs_compiled'], '.2f')}",
        "- fast_p vs eager: " + ", ".join(
            f"p={p}: {v:.2f}" for p, v in summary["fast_p_vs_eager"].items()),
    ]
    return "\n".join(lines) + "\n"


def run_bench(
    directory: Path, out_dir: Path, workspace_root: Path | None = None,
    only: list[str] | None = None, verbose: bool = True,
) -> tuple[list[ProblemOutcome], dict]:
    from kernelstitch.agents.pipeline import PipelineConfig, run_generate
    from kernelstitch.core.workspace import Workspace

    problems = sorted(p for p in Path(directory).glob("*.py") if not p.name.startswith("_"))
    if only:
        problems = [p for p in problems if p.stem in only]
    workspace = Workspace(workspace_root or Path(directory).resolve().parent)
    config = PipelineConfig(verify=True, timing=True)
    outcomes = []
    for path in problems:
        def show(event: ProgressEvent, name=path.stem) -> None:
            if verbose:
                print(f"  [{name}] {event.stage}: {event.message}", flush=True)

        result = run_generate(path, None, workspace, config, show, threading.Event())
        outcome = ProblemOutcome.from_result(path.stem, result)
        outcomes.append(outcome)
        if verbose:
            print(f"{path.stem}: {outcome.status} {outcome.message}", flush=True)
    summary = summarise(outcomes)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = environment()
    command = f"kernelstitch bench {directory}"
    (out_dir / "results.json").write_text(json.dumps(
        {"environment": env, "summary": summary, "problems": [asdict(o) for o in outcomes]},
        indent=2))
    (out_dir / "results.md").write_text(render_markdown(outcomes, summary, env, command))
    return outcomes, summary


def bench_command(directory: Path, out_dir: Path | None = None, only: list[str] | None = None) -> int:
    if not Path(directory).is_dir():
        print(f"not a folder: {directory}")
        return 1
    stamp = _dt.date.today().isoformat()
    out = out_dir or Path("bench/results") / stamp
    outcomes, summary = run_bench(Path(directory), out, only=only)
    print((out / "results.md").read_text())
    return 0 if summary["accepted"] == len(outcomes) else 1
