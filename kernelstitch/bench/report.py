"""results.json and results.md: per-problem rows, the summary, the environment and the command."""

from __future__ import annotations

import datetime as _dt
import json
import platform
from pathlib import Path
from typing import Any

from kernelstitch.bench.metrics import NOISY_SPREAD
from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.core.precision import precision_mode

SCHEMA = 1


def environment(devices: list[int | None] | None, gpus: dict[str, Any]) -> dict[str, Any]:
    """Date, host, Python, torch/CUDA versions and the names of the GPUs used.

    `gpus` is bench.tasks.gpu_info() from a worker; slot i of --jobs is the i-th visible GPU.
    """
    from kernelstitch import __version__

    names = list(gpus.get("names") or [])
    used = names[:len(devices)] if devices and len(devices) > 1 else names[:1]
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "kernelstitch": __version__,
        "torch": gpus.get("torch"),
        "cuda": gpus.get("cuda"),
        "device": ", ".join(sorted(set(used))) or "no GPU",
        "devices": used,
        "gpu_count": len(names),
    }


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _ms(median: float | None, spread: list[float] | None) -> str:
    if median is None:
        return "-"
    if not spread:
        return f"{median:.4f}"
    return f"{median:.4f} ({spread[0]:.4f}–{spread[1]:.4f})"


def _compiled(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "-"}[value]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def portable_command(command: str, cwd: Path | None = None) -> str:
    """The command with no machine paths: absolute paths under `cwd` become relative, others
    keep only their last part (`…/bench`), so committed results name no home or mount."""
    import shlex

    cwd = (cwd or Path.cwd()).resolve()
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    out = []
    for word in words:
        key, eq, value = word.partition("=") if word.startswith("--") and "=" in word else (
            "", "", word)
        if value.startswith("/"):
            path = Path(value)
            value = (path.relative_to(cwd).as_posix() if path.is_relative_to(cwd)
                     else f"…/{path.name}")
        quoted = value if value.startswith("…/") else shlex.quote(value)
        out.append(f"{key}{eq}{quoted}")
    return " ".join(out)


def _error(o: ProblemOutcome) -> str:
    """The delivered program's largest error from float64 (x RMS), PyTorch fp32's in brackets."""
    fp32 = f" ({o.fp32_max_rel_error:.1e})" if o.fp32_max_rel_error is not None else ""
    if o.max_rel_error is not None and not o.float64_describes():
        return f"not meaningful{fp32}: float64 is another computation (random draws)"
    ours = "-" if o.max_rel_error is None else f"{o.max_rel_error:.1e}"
    return f"{ours}{fp32}" if ours != "-" or fp32 else "-"


def _compiled_noise_lines(summary: dict[str, Any]) -> list[str]:
    """The vs-torch.compile geomean against torch.compile's p10, and its noisy problems."""
    if summary.get("geomean_speedup_vs_compiled_p10") is None:
        return []
    noisy = summary.get("noisy_compiled") or []
    return [f"- the same against torch.compile's p10 instead of its median (its faster runs; "
            f"{summary.get('compiled_p10_problems')} problems): "
            f"{_fmt(summary['geomean_speedup_vs_compiled_p10'], '.2f')}; torch.compile's p90 over "
            f"{NOISY_SPREAD:.2f}x its p10 on {len(noisy)}"
            + (f": {', '.join(noisy)}" if noisy else "")]


def render_markdown(outcomes: list[ProblemOutcome], summary: dict[str, Any],
                    env: dict[str, Any], command: str, precision: str | None = None) -> str:
    """`precision`: the run's setting (None: read from the outcomes, as a merge of runs does)."""
    published = summary.get("published_baselines")
    # the precision the run was made under; only a reduced one adds columns
    if precision is None:
        precision = next((o.precision for o in outcomes if o.precision != "fp32"), "fp32")
    precision = precision if precision_mode(precision).reduced else ""
    lines = [
        "# KernelStitch benchmark",
        "",
        f"- date: {env.get('date')}",
        (f"- device: {env.get('device', 'no GPU')}; torch {env.get('torch')}, "
         f"CUDA {env.get('cuda')}; host {env.get('host', '?')}"),
        f"- command: `{command}`",
        *_bandwidth_lines(env),
        "",
        ("Times are medians in ms (p10–p90); times and speedups are shown for accepted "
         "candidates only."),
        "",
        *_timed_under_lines(outcomes),
        *([f"Precision {precision} (the opt-in): eager and torch.compile were timed with it "
           "allowed; 'vs eager fp32' is against fp32 eager (precision and fusion "
           "together); 'max err' is the delivered program's largest error from a float64 "
           "recomputation, x RMS, with PyTorch fp32's in brackets.", ""] if precision else []),
        ("| problem | verdict | compiled | eager ms | torch.compile ms | ours ms | vs eager "
         "| vs compile |" + (" vs eager fp32 | max err |" if precision else "")
         + " DRAM bw | roofline | plan | prepare s | measure s |"
         + (" KB H100 eager ms | KB H100 compile ms |" if published else "")),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if published else "")
        + ("---|---|" if precision else ""),
    ]
    for o in outcomes:
        verdict = o.status if not o.reasons else f"{o.status} ({', '.join(o.reasons)})"
        if o.reused:
            verdict += " ↺"
        lines.append(
            f"| {o.problem} | {_cell(verdict)} | {_compiled(o.compiled)} | "
            f"{_ms(o.eager_ms, o.eager_spread_ms)} | {_ms(o.compiled_ms, o.compiled_spread_ms)} | "
            f"{_ms(o.candidate_ms, o.candidate_spread_ms)} | {_fmt(o.speedup_vs_eager, '.2f')} | "
            f"{_fmt(o.speedup_vs_compiled, '.2f')} | "
            + (f"{_fmt(o.speedup_vs_eager_fp32, '.2f')} | {_error(o)} | " if precision else "")
            + f"{_bandwidth_cell(o)} | "
            f"{_fmt(o.roofline_fraction, '.0%')} | "
            f"{_cell(' + '.join(o.plan_steps))} | {_fmt(o.prepare_s, '.1f')} | "
            f"{_fmt(o.measure_s, '.1f')} |"
            + (f" {_fmt(o.published_eager_ms, '.3f')} | {_fmt(o.published_compiled_ms, '.3f')} |"
               if published else "")
        )
    fast = summary["fast_p_vs_eager"]
    fast_c = summary["fast_p_vs_compiled"]
    lines += [
        "",
        "## Summary",
        "",
        f"- correct: {summary['accepted']}/{summary['problems']} "
        f"({summary['correctness_rate']:.0%}); compile failures: {summary['compile_failures']}; "
        "by status: " + ", ".join(f"{k} {v}" for k, v in summary["by_status"].items()),
        (f"- kept the original (nothing measured faster; delivered at 1.00x): "
         f"{summary.get('kept', 0)}; delivered programs significantly slower than eager: "
         f"{summary.get('slower_than_eager', 0)}"),
        ("- geomean speedup vs eager (correct only): "
         f"{_fmt(summary['geomean_speedup_vs_eager'], '.2f')}"),
        ("- geomean speedup vs torch.compile (correct only): "
         f"{_fmt(summary['geomean_speedup_vs_compiled'], '.2f')}"
         + (f" ({summary['without_compiled_time']} correct without a torch.compile time left out)"
            if summary.get("without_compiled_time") else "")),
        *_compiled_noise_lines(summary),
        *([f"- geomean speedup vs fp32 eager ({precision}; correct only): "
           f"{_fmt(summary.get('geomean_speedup_vs_eager_fp32'), '.2f')}; largest error of a "
           f"delivered program from float64: {_fmt(summary.get('max_rel_error'), '.1e')} x RMS"]
          if precision else []),
        "- fast_p vs eager: " + ", ".join(f"p={p}: {v:.2f}" for p, v in fast.items()),
        "- fast_p vs torch.compile: " + ", ".join(f"p={p}: {v:.2f}" for p, v in fast_c.items()),
        f"- mean roofline fraction (correct, profiled): "
        f"{_fmt(summary['mean_roofline_fraction'], '.0%')}"
        + ("" if summary["mean_roofline_fraction"] is not None else " (run with --profile)"),
    ]
    if summary.get("bandwidth_problems"):
        lines.append(
            f"- DRAM bandwidth of memory-bound plans ({summary['bandwidth_problems']} "
            f"accepted): mean {_fmt(summary['mean_bandwidth_fraction'], '.0%')}, lowest "
            f"{_fmt(summary['min_bandwidth_fraction'], '.0%')} of the measured bandwidth "
            "(the plan's estimated bytes / our median time)")
    if summary.get("kernel_bandwidth_problems"):
        lines.append(
            f"- DRAM bandwidth of our memory-bound kernels (delivered programs moving >= 100 MiB "
            f"through them, {summary['kernel_bandwidth_problems']} problems): median "
            f"{_fmt(summary['median_kernel_bandwidth_fraction'], '.0%')}; at >= 80%: "
            f"{summary['kernel_bandwidth_at_target']} (their steps' estimated bytes / their "
            "kernels' GPU time in the Verifier's profile)")
    if published:
        lines.append(
            f"- KernelBench's published H100 times ({published['problems']} problems; "
            f"{(env.get('published_baselines') or {}).get('hardware') or 'H100'}, mean ms): "
            f"our eager / theirs, geomean {_fmt(published['geomean_eager_vs_published'], '.2f')} "
            f"over {published['eager_compared']}, torch.compile "
            f"{_fmt(published['geomean_compiled_vs_published'], '.2f')} over "
            f"{published['compiled_compared']} ({_published_agreement(published)}); "
            "ours vs their eager, geomean "
            f"{_fmt(published['geomean_speedup_vs_published_eager'], '.2f')}")
    if summary.get("reused"):
        lines.append(f"- ↺ {summary['reused']} result(s) reused from the run store "
                     "(--rerun runs them again)")
    lines += _stage_lines(summary.get("stage_times") or {})
    rejected = [o for o in outcomes if o.status == "rejected" and o.reason_details]
    if rejected:
        lines += ["", "## Why candidates were rejected", ""]
        for o in rejected:
            lines += [f"- **{o.problem}**: " + "; ".join(_cell(d) for d in o.reason_details)]
    passed = [o for o in outcomes if o.passed_over]
    if passed:
        lines += ["", "## Faster variants not delivered", ""]
        for o in passed:
            lines += [f"- **{o.problem}** (delivered {o.delivered}): " + "; ".join(
                f"{name} ({_fmt(o.variants_ms.get(name))} ms): {_cell(note)}"
                for name, note in o.passed_over.items())]
    failures = [o for o in outcomes if o.compiled is False and o.compile_message]
    if failures:
        lines += ["", "## Compile failures", ""]
        for o in failures:
            lines += [f"### {o.problem}", "", o.message, "", "```",
                      o.compile_message[-1500:].strip(), "```", ""]
    return "\n".join(lines) + "\n"


def _stage_lines(groups: dict[str, dict[str, Any]]) -> list[str]:
    """Median seconds of prepare, measure and each Verifier stage, overall and per level."""
    if not groups:
        return []
    lines = ["", "## Stage times", "",
             "Medians in seconds over the problems that have the stage (cancelled ones left "
             "out); `prepare_stage_s` and `verify_stage_s` of each problem in results.json have "
             "its own.", "",
             "| problems | count | prepare s (n) | measure s (n) |", "|---|---|---|---|"]
    for name, g in groups.items():
        lines.append(f"| {name} | {g['problems']} | {_fmt(g['prepare_s'], '.1f')} "
                     f"({g['prepared']}) | {_fmt(g['measure_s'], '.1f')} ({g['measured']}) |")
    stages = list(dict.fromkeys(k for g in groups.values() for k in g["verify_stage_s"]))
    if stages:
        lines += ["", "| stage | " + " | ".join(f"{n} s (n)" for n in groups) + " |",
                  "|---|" + "---|" * len(groups)]
        for stage in stages:
            cells = []
            for g in groups.values():
                median, count = g["verify_stage_s"].get(stage, (None, 0))
                cells.append(f"{_fmt(median, '.2f')} ({count})" if count else "-")
            label = stage if stage.count(".") == 0 or stage.startswith("prepare.") \
                else "&nbsp;&nbsp;" + stage
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def results_json(outcomes: list[ProblemOutcome], summary: dict[str, Any], env: dict[str, Any],
                 command: str, settings: dict[str, Any], plots: list[str],
                 notes: list[str]) -> dict[str, Any]:
    return {
        "schema": SCHEMA, "command": command, "environment": env, "settings": settings,
        "summary": summary, "plots": plots, "notes": notes,
        "problems": [o.to_json() for o in outcomes],
    }


def write_json(path: Path, data: dict[str, Any]) -> Path:
    from kernelstitch.core.workspace import write_text_atomic

    return write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


# Beyond this factor either way, our eager and theirs did not time the same thing: another GPU,
# or other settings (timing convolutions with cuDNN's TF32 off made ours 2-2.3x slower, 2026-11-27).
PUBLISHED_AGREEMENT = 1.25


def _published_agreement(published: dict[str, Any]) -> str:
    ratio = published.get("geomean_eager_vs_published")
    if ratio is None:
        return "no eager time to compare"
    if 1 / PUBLISHED_AGREEMENT <= ratio <= PUBLISHED_AGREEMENT:
        return "near 1: this machine times like theirs"
    return ("far from 1: this machine or its settings time eager differently from theirs, so "
            "speed-ups here and theirs do not compare")


def _bandwidth_cell(o: ProblemOutcome) -> str:
    """The plan's bandwidth fraction (all of it memory-bound), else its memory-bound kernels'
    marked `k` (library calls around them left out)."""
    if o.bandwidth_fraction is not None:
        return _fmt(o.bandwidth_fraction, ".0%")
    if o.kernel_bandwidth_fraction is not None:
        return f"k {_fmt(o.kernel_bandwidth_fraction, '.0%')}"
    return "-"


def _bandwidth_lines(env: dict[str, Any]) -> list[str]:
    """The DRAM bandwidth the fractions are against: each card's where several were measured."""
    how = "(best of 10 device-to-device copies of 1 GiB, read + write bytes)"
    by_gpu = env.get("dram_bytes_per_s_by_gpu") or {}
    if len(by_gpu) > 1:
        cards = ", ".join(f"GPU {g} {bw / 1e9:.0f}" for g, bw in sorted(by_gpu.items()))
        return [f"- DRAM bandwidth measured on each GPU at the start: {cards} GB/s {how}; a "
                "problem's fraction is against its own GPU's"]
    if env.get("dram_bytes_per_s"):
        return [f"- DRAM bandwidth measured on this GPU at the start: "
                f"{env['dram_bytes_per_s'] / 1e9:.0f} GB/s {how}"]
    return []


def _timed_under_lines(outcomes: list[ProblemOutcome]) -> list[str]:
    """What the times were taken under, run by run (a merge can mix runs)."""
    timed = [o for o in outcomes if o.eager_ms is not None or o.candidate_ms is not None]
    labels = sorted({o.timed_under for o in timed if o.timed_under})
    old = [o.problem for o in timed if not o.timed_under]
    lines = [f"Programs, eager and torch.compile timed under {label}; correctness checked in "
             "strict fp32." for label in labels]
    if old:
        lines.append(f"{len(old)} problem(s) come from runs before 2026-11-27 (638c584), which timed "
                     "cuDNN with TF32 off: on convolutions and RNNs their baselines are slower than "
                     "PyTorch runs them by default, and their speed-ups overstate the gain.")
    return [*lines, ""] if lines else []
