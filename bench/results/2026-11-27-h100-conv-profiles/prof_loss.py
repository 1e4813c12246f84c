"""Where the time goes: eager (PyTorch defaults), torch.compile and our generated program, per
kernel (torch.profiler), for each problem given.  Usage: python scripts/_prof_loss.py OUT P.py..."""
import importlib.util, json, subprocess, sys, time
from collections import defaultdict
from pathlib import Path
import torch

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod

def kernels(fn, inputs, calls=5):
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        fn(*inputs)
    e.record(); torch.cuda.synchronize()
    wall = s.elapsed_time(e) / 10
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    per = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name[:110]] += ev.device_time_total / 1000 / calls
    return wall, sorted(per.items(), key=lambda kv: -kv[1])

for p in sys.argv[2:]:
    name = Path(p).stem
    t0 = time.time()
    gen = subprocess.run(["kernelstitch", "generate", p, "--workspace", "/tmp/ws_prof", "--json"],
                         capture_output=True, text=True)
    cand = None
    try:
        res = json.loads(gen.stdout)
        cand = res.get("candidate_path") or res.get("candidate") or res.get("path")
        (out / f"{name}.gen.json").write_text(gen.stdout)
    except Exception:
        (out / f"{name}.gen.txt").write_text(gen.stdout[-5000:] + gen.stderr[-5000:])
    if not cand:
        found = list(Path("/tmp/ws_prof/.kernelstitch").glob(f"*{name}*/Model/model_new.py"))
        cand = str(found[0]) if found else None
    print(f"== {p}: generate rc {gen.returncode} in {time.time() - t0:.0f} s, candidate {cand}", flush=True)
    mod = load(p, "prob_" + name)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    fns = {"eager": model, "compile": torch.compile(model)}
    progs = [("ours", cand)] if cand else []
    if cand:
        progs += [(f"variant {v.parent.name}", str(v)) for v in sorted(Path(cand).parent.glob("variants/*/model_new.py"))]
    for label, path in progs:
        try:
            sys.path.insert(0, str(Path(path).parent))
            cmod = load(path, "cand_" + name + label.replace(" ", "_").replace("-", "_"))
            torch.manual_seed(0)
            fns[label] = cmod.ModelNew(*mod.get_init_inputs()).cuda()
        except Exception as exc:
            print(f"  {label}: load failed {exc!r}"[:300])
    lines = []
    with torch.no_grad():
        for k, fn in fns.items():
            try:
                wall, per = kernels(fn, inputs)
            except Exception as exc:
                lines.append(f"  {k}: failed {exc!r}"[:300]); continue
            lines.append(f"  {k}: {wall:.3f} ms/call (events), kernels {sum(v for _, v in per):.3f} ms")
            for kn, v in per[:8]:
                lines.append(f"     {v:8.3f}  {kn}")
    text = "\n".join(lines)
    print(text, flush=True)
    (out / f"{name}.prof.txt").write_text(text)
