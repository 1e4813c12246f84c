"""Run one generated program (and the problem's eager model) a few times for ncu:
python scripts/_ncu_prog.py PROBLEM.py MODEL_NEW.py  (profiling window: cudaProfilerStart/Stop)."""
import importlib.util, sys
from pathlib import Path
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

prob = load(sys.argv[1], "prob")
sys.path.insert(0, str(Path(sys.argv[2]).parent))
new = load(sys.argv[2], "cand")
torch.manual_seed(0)
model = new.ModelNew(*prob.get_init_inputs()).cuda()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
with torch.no_grad():
    for _ in range(3):
        model(*inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    model(*inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
print("ok")
