"""What a CUDA-graph program's Python costs ahead of each replay, on one GPU in one process.

    python bench/graph_key_timing.py PROBLEM.py=VARIANT/model_new.py [...]

For each problem: the original replayed from a CUDA graph (the Verifier's `original-graph`
baseline), the generated program as it is (its graph key reads the module's kept tensor
slots), and the same program with the key walking `module.parameters()` / `.buffers()` on every
call (before the cache).  Timed as the Verifier times variants (agents/verifier/timing.py: L2
flushed, device idle, events around one call), in interleaved rounds; plus the key's host time
alone.  Prints one JSON line per problem.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from kernelstitch.agents.verifier.graph_replay import GraphedModule

from kernelstitch.core.problem import import_file, load_problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from program_ab import interleaved_samples  # noqa: E402

ROUNDS = 5
ROUND_BUDGET_S = 0.4


def walking_signature(graphs, module, inputs):
    """The key before the cache: every parameter and buffer walked on each call."""
    return (tuple((tuple(t.shape), t.dtype, t.stride(), t.device) for t in inputs),
            tuple(p.data_ptr() for p in module.parameters()) + tuple(b.data_ptr() for b in module.buffers()))


def host_us(fn, calls: int = 300) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def measure(problem_path: Path, program_path: Path) -> dict:
    problem = load_problem(problem_path, None)
    torch.manual_seed(0)
    original = problem.build().cuda()
    namespace = import_file(program_path, prefix="ks_graph_key")
    cached = namespace.ModelNew(*problem.get_init_inputs()).cuda()
    cached.load_state_dict(original.state_dict())
    walking = namespace.ModelNew(*problem.get_init_inputs()).cuda()
    walking.load_state_dict(original.state_dict())
    graphs = walking._cuda_graphs
    graphs.signature = lambda module, inputs: walking_signature(graphs, module, inputs)
    inputs = [[t.cuda() if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()]
              for _ in range(2)]
    programs = {"original-graph": GraphedModule(original), "cached-key": cached, "walking-key": walking}
    with torch.no_grad():
        for model in programs.values():
            for _ in range(3):
                model(*inputs[0])
        torch.cuda.synchronize()
    samples = interleaved_samples(programs, inputs, ROUNDS, ROUND_BUDGET_S, min_runs=20)
    x = tuple(inputs[0])
    return {"problem": problem_path.stem, "device": torch.cuda.get_device_name(),
            "median_ms": {n: round(statistics.median(s), 4) for n, s in samples.items()},
            "runs": {n: len(s) for n, s in samples.items()},
            "key_host_us": {"cached-key": round(host_us(lambda: cached._cuda_graphs.signature(cached, x)), 1),
                            "walking-key": round(host_us(lambda: walking_signature(graphs, walking, x)), 1)},
            "tensors": len(list(cached.parameters())) + len(list(cached.buffers()))}


def main(argv: list[str]) -> None:
    for pair in argv:
        problem, program = pair.split("=", 1)
        try:
            print(json.dumps(measure(Path(problem), Path(program))), flush=True)
        except Exception as exc:  # noqa: BLE001 - one problem's failure is reported, the rest run
            print(json.dumps({"problem": problem, "error": f"{type(exc).__name__}: {exc}"[:400]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
