"""Why a channels-last variant fails the Verifier's check under the timing settings (cuDNN TF32
allowed) while passing every strict-fp32 check: the original's and each variant's error from the
strict-fp32 original, with TF32 off and on.  If TF32 leaves the original's result unchanged (its
cuDNN algorithm for this layout has no TF32 path), the judge holds the candidate to fp32's bound
under those settings too; a channels-last conv that does use TF32 then fails it.
Usage: python tf32_diag.py PROBLEM.py GENERATED_DIR VARIANT...  (GENERATED_DIR: kernelstitch
generate's .kernelstitch/<stem>/Model)."""
import importlib.util
import sys

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(model, inputs, tf32):
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        out = model(*inputs)
    torch.cuda.synchronize()
    return out.float()


def describe(label, got, ref):
    rms = ref.pow(2).mean().sqrt().clamp_min(1e-30)
    d = (got - ref).abs()
    fails = {name: float((d > atol * rms + rtol * ref.abs()).float().mean())
             for name, rtol, atol in (("fp32", 1e-4, 1e-4), ("tf32", 1e-2, 1e-2))}
    print(f"  {label:28} max|d|/rms {float(d.max() / rms):.3e}  fraction failing fp32 bound "
          f"{fails['fp32']:.2e}, tf32 bound {fails['tf32']:.2e}  strides {tuple(got.stride())}", flush=True)


def main():
    problem_path, generated, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
    problem = load(problem_path, "problem")
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    ref = run(model, inputs, False)
    base = run(model, inputs, True)
    print(problem_path, "original under TF32 identical to strict:", torch.equal(ref, base), flush=True)
    describe("original, TF32 allowed", base, ref)
    for variant in variants:
        cand_module = load(f"{generated}/variants/{variant}/model_new.py", f"cand_{variant.replace('-', '_')}")
        torch.manual_seed(0)
        cand = cand_module.ModelNew(*problem.get_init_inputs()).cuda().eval()
        cand.load_state_dict(model.state_dict())
        for tf32 in (False, True):
            describe(f"{variant}, TF32 {'allowed' if tf32 else 'off'}", run(cand, inputs, tf32), ref)


if __name__ == "__main__":
    main()
