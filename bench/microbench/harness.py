"""The standalone harness of the coder's-kernel microbenchmarks (rows_gen.py, cols_gen.py): a
main() (harness_main.cu, a template) appended to an emitted reduction's CUDA text that fills one
fp32 input, plans with ks_plan_reduction (plus an optional override), calls the emitted launcher
and prints one JSON line (median and p10 of 30 event-timed launches after 3 warm-ups, a checksum
of the output to compare variants, the plan's path and row shape).

Variants are made by the emitter itself (`ReductionVariant`: the design knobs the coder's
defaults were chosen with), never by editing the emitted text."""

from __future__ import annotations

from pathlib import Path

from kernelstitch.agents.coder.codegen.reduction import ReductionVariant, emit_reduction
from kernelstitch.agents.coder.codegen.templates import render_path
from kernelstitch.agents.plan.kernel_spec import ReductionSpec, TensorArg, spec_from_json

MAIN = Path(__file__).with_name("harness_main.cu")


def write_programs(out: Path, problem: str, spec_json: dict, shape: tuple[int, int, int],
                   variants: dict[str, tuple[str, ReductionVariant]]) -> list[Path]:
    """One OUT/<problem>__<variant>.cu per variant: (plan override statements, emitter knobs).
    `shape` is the [outer, R, inner] view of the single fp32 input."""
    out.mkdir(parents=True, exist_ok=True)
    spec = spec_from_json(spec_json)
    assert isinstance(spec, ReductionSpec) and all(isinstance(t, TensorArg) for t in spec.inputs)
    outer, rows, inner = shape
    paths = []
    for variant, (override, knobs) in variants.items():
        main_src = render_path(MAIN, outer=outer, rows=rows, inner=inner, override=override,
                               launch=f"{spec.name}_launch", problem=problem, variant=variant)
        path = out / f"{problem}__{variant}.cu"
        path.write_text(emit_reduction(spec, knobs).cuda + "\n" + main_src)
        paths.append(path)
    return paths
