"""`kernelstitch bench DIR`: the pipeline over a folder of KernelBench-format problems.

    problems.py   find the problems (flat folder or level1/ level2/ ...), BenchError
    settings.py   BenchSettings, the GPUs used, the resume key
    outcome.py    ProblemOutcome: one problem's result
    phases.py     prepare / measure under the per-problem time limit; the runner interface
    runner.py     the real runner (pipeline generate, pre-build, verify, profile)
    schedule.py   local: build_jobs prepares at once, one measurement per GPU
    ray_backend.py  --ray: one Ray task per problem
    resume.py     finished problems in the run store
    metrics.py    fast_p, geomean, summary;  report.py  JSON + markdown;  plots.py  PNGs
    run.py        run_bench;  cli.py  bench_command (progress bar, exit status)

Importing this package does not import torch, rich, matplotlib or ray.
"""

from kernelstitch.bench.cli import bench_command
from kernelstitch.bench.metrics import FAST_P, fast_p, geomean, summarise
from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.problems import BenchError, ProblemSpec, discover
from kernelstitch.bench.report import environment, render_markdown
from kernelstitch.bench.run import BenchRun, run_bench
from kernelstitch.bench.settings import BenchSettings

__all__ = [
    "FAST_P", "BenchError", "BenchRun", "BenchSettings", "ProblemOutcome", "ProblemSpec",
    "bench_command", "discover", "environment", "fast_p", "geomean", "render_markdown",
    "run_bench", "summarise",
]
