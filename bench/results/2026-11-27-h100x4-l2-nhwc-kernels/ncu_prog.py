"""Runs one generated program a few times for ncu (profiling window: cudaProfilerStart/Stop).

Usage: python ncu_prog.py PROBLEM.py MODEL_NEW.py
"""
import importlib.util
import sys
from pathlib import Path

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    problem = load(sys.argv[1], "prob")
    sys.path.insert(0, str(Path(sys.argv[2]).parent))
    candidate = load(sys.argv[2], "cand")
    torch.manual_seed(0)
    model = candidate.ModelNew(*problem.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print("ok")


if __name__ == "__main__":
    main()
