"""Generate a problem's default candidate with the imported KernelStitch and build it into an
empty extension cache: the build's seconds and each ninja target's (main.o: the bindings;
cuda_<k>.cuda.o or cuda.cuda.o: the kernels).  Usage: python build_steps.py PROBLEM.py WORKDIR"""
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from kernelstitch.agents.coder.builtin import write_candidate
from kernelstitch.agents.inprocess import generate_builtin

from kernelstitch.bench.tasks import ninja_steps

problem, work = Path(sys.argv[1]), Path(sys.argv[2])
work.mkdir(parents=True, exist_ok=True)
os.environ["KS_EXTENSIONS_DIR"] = str(work / "ext")
path = write_candidate(generate_builtin(problem, None, work / "model_new.py"), work)
spec = importlib.util.spec_from_file_location("ks_build_steps", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
units = module._cuda_units(module._CUDA_SOURCE, module._build_jobs())
start = time.monotonic()
extension = module._build_extension()
seconds = time.monotonic() - start
print(json.dumps({"problem": problem.name, "MAX_JOBS": os.environ.get("MAX_JOBS"),
                  "cuda_chars": len(module._CUDA_SOURCE), "units": len(units),
                  "build_s": round(seconds, 1), "steps": ninja_steps(Path(extension.__file__).parent)}))
