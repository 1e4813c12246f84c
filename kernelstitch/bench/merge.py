"""`kernelstitch bench-merge`: one report over runs made in several calls, samples or commits.

A GPU lease is shorter than a whole level, so a level is measured in samples; this joins their
results.json files into one table and one summary.  Nothing is re-measured: each problem keeps
the numbers, environment and code of the run it came from (a later file wins for a problem in
several, unless the later one was cancelled), and the report lists every source with its command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelstitch.bench.metrics import summarise
from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.plots import write_plots
from kernelstitch.bench.report import render_markdown, results_json, write_json


@dataclass(frozen=True)
class MergeSource:
    path: Path
    command: str
    problems: int


def load_outcomes(path: Path) -> tuple[dict[str, Any], list[ProblemOutcome]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("problems"), list):
        raise ValueError(f"{path}: not a bench results.json (no problems list)")
    return data, [_normalised(ProblemOutcome.from_json(p)) for p in data["problems"]]


def _normalised(outcome: ProblemOutcome) -> ProblemOutcome:
    """Runs before f49ad75 gave a kept original the record variant's spread: what is delivered
    is the original, so its spread is eager's.  Runs before the twelfth session left a kept
    original without timings when the record verification stopped early."""
    if outcome.status == "kept":
        outcome.candidate_spread_ms = outcome.eager_spread_ms
        outcome.time_kept_original_from_search()
    return outcome


MEASURED = ("accepted", "kept")  # statuses with timings a later timeout may leave standing


def merge_results(paths: list[Path], out_dir: Path,
                  finished_over_timeouts: bool = False) -> tuple[dict[str, Any], list[MergeSource]]:
    """Write out_dir/results.json and results.md (and plots); return (summary, sources).
    `finished_over_timeouts`: a later call's timeout (a problem over the call's per-problem
    limit) leaves an earlier measured result standing, named in the report's notes and the
    problem's own, instead of replacing it (a timeout is a result too: off by default)."""
    by_problem: dict[str, ProblemOutcome] = {}
    origin: dict[str, Path] = {}
    sources, env, kept_over = [], {}, []
    for path in paths:
        data, outcomes = load_outcomes(path)
        env = data.get("environment") or env
        sources.append(MergeSource(path, str(data.get("command", "")), len(outcomes)))
        for outcome in outcomes:
            # A problem a later call cancelled (its limit, not the problem's) keeps the result
            # an earlier call finished: cancelled outcomes are never stored by the bench either.
            earlier = by_problem.get(outcome.problem)
            if outcome.status == "cancelled" and earlier is not None and earlier.status != "cancelled":
                continue
            if (finished_over_timeouts and outcome.status == "timeout" and earlier is not None
                    and earlier.status in MEASURED):
                note = (f"a later timeout in {_label(path)} ({outcome.message or 'over the time limit'}) "
                        f"left this result of {_label(origin[outcome.problem])} standing")
                earlier.notes.append(note)
                kept_over.append(f"{outcome.problem}: {note}")
                continue
            by_problem[outcome.problem] = outcome
            origin[outcome.problem] = path
    outcomes = sorted(by_problem.values(), key=lambda o: (str(o.level or ""), _number(o.problem)))
    summary = summarise(outcomes)
    notes = [f"source {_label(s.path)}: {s.problems} problems, `{s.command}`" for s in sources] + kept_over
    command = "kernelstitch bench-merge " + " ".join(_label(s.path) for s in sources) + (
        " --finished-over-timeouts" if finished_over_timeouts else "")
    out_dir.mkdir(parents=True, exist_ok=True)
    plots, note = write_plots(outcomes, out_dir)
    if note:
        notes.append(note)
    write_json(out_dir / "results.json", results_json(
        outcomes, summary, env, command, {"merged_from": [str(s.path) for s in sources]},
        [p.name for p in plots], notes))
    markdown = render_markdown(outcomes, summary, env, command)
    markdown += "\n" + "".join(f"![{p.stem}]({p.name})\n" for p in plots)
    markdown += "\n" + "".join(f"- note: {n}\n" for n in notes)
    (out_dir / "results.md").write_text(markdown, encoding="utf-8")
    return summary, sources


def _label(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _number(problem: str) -> int:
    stem = problem.rsplit("/", 1)[-1]
    digits = stem.split("_", 1)[0]
    return int(digits) if digits.isdigit() else 0
