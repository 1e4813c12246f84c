"""Two or more generated programs of one problem, side by side on one GPU in one process.

    python bench/program_ab.py PROBLEM.py NAME=model_new.py NAME=model_new.py [...] [--out ab.json]

Every program gets the original's parameters, then all are timed as the Verifier times variants
(agents/verifier/timing.py: L2 flushed, device idle, events around one call) in interleaved
rounds, and each one's kernels are summed by family (bench/kernel_breakdown.py's families,
torch.profiler over 5 calls, launched kernel by kernel where a program replays a CUDA graph).
The outputs are compared with the first program's. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from kernelstitch.agents.verifier import timing

from kernelstitch.core.problem import import_file, load_problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_breakdown import _families, launched_kernel_table  # noqa: E402

ROUNDS = 5
ROUND_BUDGET_S = 0.5


def interleaved_samples(programs: dict, inputs: list, rounds: int = ROUNDS, budget_s: float = ROUND_BUDGET_S,
                        min_runs: int = 10) -> dict[str, list[float]]:
    """Each program's per-call ms (the Verifier's timer: L2 flushed, device idle, events around
    one call), `rounds` rounds taking the programs in turn; the programs already warmed up."""
    flush = timing.L2Flusher(torch.device("cuda"))
    samples: dict[str, list[float]] = {name: [] for name in programs}
    with torch.no_grad():
        for _ in range(rounds):
            for name, model in programs.items():
                timed = timing.time_function(lambda xs, model=model: model(*xs), inputs, flush,
                                             min_runs=min_runs, budget_s=budget_s)
                samples[name] += timed.samples_ms
    return samples


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem", type=Path)
    parser.add_argument("programs", nargs="+", help="NAME=model_new.py")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    problem = load_problem(args.problem, None)
    torch.manual_seed(0)
    original = problem.build().cuda()
    programs = {}
    for k, spec in enumerate(args.programs):
        name, _, path = spec.partition("=")
        model = import_file(Path(path), prefix=f"ks_ab{k}").ModelNew(*problem.get_init_inputs()).cuda()
        model.load_state_dict(original.state_dict())
        programs[name] = model
    torch.manual_seed(1)
    inputs = [[t.cuda() if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()] for _ in range(2)]
    result: dict = {"problem": args.problem.stem, "device": torch.cuda.get_device_name()}
    with torch.no_grad():
        first = None
        for name, model in programs.items():
            out = model(*inputs[0]).float()
            first = out if first is None else first
            result.setdefault("max_abs_diff_vs_first", {})[name] = float((out - first).abs().max())
        torch.cuda.synchronize()
    samples = interleaved_samples(programs, inputs)
    result["median_ms"] = {n: round(statistics.median(s), 4) for n, s in samples.items()}
    result["runs"] = {n: len(s) for n, s in samples.items()}
    result["families_ms"] = {}
    for name, model in programs.items():
        kernels = launched_kernel_table(model, inputs[0], 5)
        result["families_ms"][name] = _families(kernels)
        result.setdefault("top_kernels_ms", {})[name] = {k: round(v, 4) for k, v in list(kernels.items())[:8]}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
