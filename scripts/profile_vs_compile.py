"""Where the time goes, per kernel: eager (PyTorch's default settings), torch.compile, the
program `kernelstitch generate` delivers and every variant it measured, for each problem given
(a GPU machine; bench/results/2026-11-27-h100-conv-profiles used it).

Usage: python scripts/profile_vs_compile.py [--workspace W] OUT_DIR PROBLEM.py [PROBLEM.py ...]
Writes OUT_DIR/<problem>.gen.json (the generate result) and <problem>.prof.txt, and prints both
tables: ms per call from CUDA events (10 calls), and the top kernels (torch.profiler, 5 calls).
--workspace W: profile the programs a run already left in W (`kernelstitch bench --workspace W`
or generate's), generating only problems it lacks; default /tmp/ws_prof.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

WORKSPACE = "/tmp/ws_prof"


def existing(problem: str, workspace: str) -> str | None:
    """A program an earlier run generated for `problem` in `workspace` (folder <key>__<stem>)."""
    found = sorted(Path(workspace, ".kernelstitch").glob(f"*__{Path(problem).stem}/Model/model_new.py"))
    return str(found[0]) if found else None


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_table(fn, inputs, calls: int = 5) -> tuple[float, list[tuple[str, float]]]:
    """(ms per call by CUDA events, [(kernel, ms per call)] heaviest first)."""
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        fn(*inputs)
    end.record()
    torch.cuda.synchronize()
    wall = start.elapsed_time(end) / 10
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    per: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per[event.name[:110]] += event.device_time_total / 1000 / calls
    return wall, sorted(per.items(), key=lambda kv: -kv[1])


def generated(problem: str, out: Path, workspace: str) -> str | None:
    """The delivered program's path (kernelstitch generate, search and verification on)."""
    name = Path(problem).stem
    done = subprocess.run(["kernelstitch", "generate", problem, "--workspace", workspace, "--json"],
                          capture_output=True, text=True, check=False)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        (out / f"{name}.gen.txt").write_text(done.stdout[-5000:] + done.stderr[-5000:])
        return None
    (out / f"{name}.gen.json").write_text(done.stdout)
    return result.get("candidate_path")


def programs(problem_module, candidate: str | None) -> dict:
    torch.manual_seed(0)
    model = problem_module.Model(*problem_module.get_init_inputs()).cuda()
    found = {"eager": model, "compile": torch.compile(model)}
    if not candidate:
        return found
    paths = [("ours", candidate)]
    paths += [(f"variant {p.parent.name}", str(p))
              for p in sorted(Path(candidate).parent.glob("variants/*/model_new.py"))]
    for label, path in paths:
        try:
            sys.path.insert(0, str(Path(path).parent))
            module = load(path, "cand_" + label.replace(" ", "_").replace("-", "_"))
            torch.manual_seed(0)
            found[label] = module.ModelNew(*problem_module.get_init_inputs()).cuda()
        except Exception as exc:  # a variant that does not load is reported, not fatal
            print(f"  {label}: load failed {exc!r}"[:300])
    return found


def main(out_dir: str, problems: list[str], workspace: str = WORKSPACE) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for problem in problems:
        name, started = Path(problem).stem, time.time()
        candidate = existing(problem, workspace) or generated(problem, out, workspace)
        print(f"== {problem}: generated in {time.time() - started:.0f} s, candidate {candidate}", flush=True)
        module = load(problem, "problem_" + name)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        lines = []
        with torch.no_grad():
            for label, fn in programs(module, candidate).items():
                try:
                    wall, per = kernel_table(fn, inputs)
                except Exception as exc:
                    lines.append(f"  {label}: failed {exc!r}"[:300])
                    continue
                lines.append(f"  {label}: {wall:.3f} ms/call (events), kernels {sum(v for _, v in per):.3f} ms")
                lines += [f"     {ms:8.3f}  {kernel}" for kernel, ms in per[:8]]
        text = "\n".join(lines)
        print(text, flush=True)
        (out / f"{name}.prof.txt").write_text(text)


if __name__ == "__main__":
    args = sys.argv[1:]
    where = WORKSPACE
    if args[:1] == ["--workspace"]:
        where, args = args[1], args[2:]
    main(args[0], args[1:], where)
