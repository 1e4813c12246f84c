"""End to end on a GPU: every example -> graph -> plan -> ModelNew, compiled with load_inline,
compared with the reference on fresh random inputs at the captured shape and at another valid
shape (the candidate takes its sizes at run time).  Shapes are shrunk by overriding the
examples' UPPERCASE constants (odd sizes, to exercise vector tails); a few run at full size.

`python tests/test_compiler_gpu.py [OUT_DIR]` runs the whole suite with the extensions compiled
in parallel first and prints a table (what the device run uses)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CASES = [(p, None) for p in sorted(EXAMPLES.glob("*.py"))] + [
    (EXAMPLES / "user_style" / "fused_norm.py", None),
    (EXAMPLES / "user_style" / "encoder_gated_mlp.py", "GatedMLP"),
]
FULL_SIZE = ("elementwise_chain.py", "softmax_temperature.py", "fused_norm.py",
             "linear_bias_gelu.py", "conv2d_bias_relu.py")


def case_id(case) -> str:
    path, module = case
    return path.stem + (f"::{module}" if module else "")


def init_names(path: Path) -> set[str]:
    """Module-level names the constructor arguments depend on (they fix the weights' shapes)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("get_init_inputs"):
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return names


def shape_constants(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text())
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            found[node.targets[0].id] = node.value.value
    return found


def shrunk(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(overrides for the captured shape, overrides for a second shape) - the second changes
    only sizes the constructor does not see."""
    consts = {k: v for k, v in shape_constants(path).items() if v >= 16}
    first = {k: max(5, v // 16 + 3) for k, v in consts.items()}
    fixed = init_names(path)
    second = dict(first)
    for k, v in consts.items():
        if k not in fixed:
            second[k] = max(3, v // 64 + 1)
    return first, second


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return (2e-2, 2e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-3, 1e-3)


def import_candidate(path: Path):
    spec = importlib.util.spec_from_file_location(f"ks_candidate_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(case, out_dir: Path, overrides: dict[str, int] | None) -> Path:
    from kernelstitch.agents.coder.builtin import write_candidate
    from kernelstitch.agents.inprocess import generate_builtin

    path, module = case
    candidate = generate_builtin(path, module, out_dir / "model_new.py", constants=overrides)
    return write_candidate(candidate, out_dir)


def _outputs(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def compare(case, candidate_path: Path, overrides, other) -> dict:
    """Build reference and candidate with the same state; compare on fresh inputs at two
    shapes.  Returns {'ok', 'max_err', 'ms_ref', 'ms_new', 'detail'}."""
    from kernelstitch.core.problem import load_problem

    path, module = case
    problem = load_problem(path, module)
    for k, v in (overrides or {}).items():
        setattr(problem.namespace, k, v)
    torch.manual_seed(0)
    init = problem.get_init_inputs()
    reference = problem.module_class(*init).cuda()
    new = import_candidate(candidate_path).ModelNew(*init).cuda()
    missing = set(reference.state_dict()) ^ set(new.state_dict())
    assert not missing, f"state_dict keys differ: {missing}"
    new.load_state_dict(reference.state_dict())
    worst = 0.0
    shapes = []
    for label, consts in (("captured", overrides), ("other", other)):
        for k, v in (consts or {}).items():
            setattr(problem.namespace, k, v)
        torch.manual_seed(1 if label == "captured" else 2)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        with torch.no_grad():
            want = _outputs(reference(*inputs))
            got = _outputs(new(*inputs))
            again = _outputs(new(*inputs))
        assert len(want) == len(got), f"{label}: {len(got)} outputs, expected {len(want)}"
        for w, g, a in zip(want, got, again):
            assert g.shape == w.shape and g.dtype == w.dtype, (
                f"{label}: got {tuple(g.shape)} {g.dtype}, expected {tuple(w.shape)} {w.dtype}")
            assert g.data_ptr() != a.data_ptr(), f"{label}: outputs alias across calls"
            atol, rtol = tolerance(w.dtype)
            err = (g.float() - w.float()).abs()
            bound = atol + rtol * w.float().abs()
            worst = max(worst, float((err / bound).max()) if err.numel() else 0.0)
            assert torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol), (
                f"{label} shape {tuple(inputs[0].shape)}: max abs err {float(err.max()):.3g}")
        shapes.append(tuple(inputs[0].shape) if isinstance(inputs[0], torch.Tensor) else ())
        if label == "captured":
            timed = inputs  # timings at the captured shape (the other one may be tiny)
    ms_ref, ms_new = _time(reference, timed), _time(new, timed)
    return {"ok": True, "max_err_ratio": worst, "ms_ref": ms_ref, "ms_new": ms_new,
            "shapes": shapes}


def _time(model, inputs, iters: int = 10) -> float:
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            model(*inputs)
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@pytest.mark.slow
@needs_gpu
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_candidate_matches_reference_shrunk(case, tmp_path):
    first, second = shrunk(case[0])
    candidate = generate(case, tmp_path, first)
    compare(case, candidate, first, second)


@pytest.mark.gpu
@pytest.mark.slow
@needs_gpu
@pytest.mark.parametrize("case", [c for c in CASES if c[0].name in FULL_SIZE], ids=case_id)
def test_candidate_matches_reference_full_size(case, tmp_path):
    _, second = shrunk(case[0])
    candidate = generate(case, tmp_path, None)
    compare(case, candidate, None, {k: v for k, v in second.items()
                                    if k not in init_names(case[0])})


# ---- script mode: parallel compile, then compare, print a table --------------------------------

def _compile(candidate_path: str) -> tuple[str, float, str]:
    start = time.time()
    try:
        import_candidate(Path(candidate_path))._build_extension()
        return candidate_path, time.time() - start, ""
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return candidate_path, time.time() - start, f"{type(exc).__name__}: {str(exc)[-1500:]}"


def main(out_dir: Path) -> int:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []  # (label, case, overrides, other, dir)
    for case in CASES:
        first, second = shrunk(case[0])
        jobs.append((case_id(case) + " (shrunk)", case, first, second))
        if case[0].name in FULL_SIZE:
            fixed = init_names(case[0])
            jobs.append((case_id(case) + " (full)", case, None,
                         {k: v for k, v in second.items() if k not in fixed}))
    rows, built = [], {}
    work = Path(os.environ.get("KS_WORK", "/tmp/ks_gpu_work"))
    for k, (label, case, first, _second) in enumerate(jobs):
        try:
            built[label] = generate(case, work / f"c{k}", first)
        except Exception as exc:  # noqa: BLE001
            rows.append((label, "GENERATE FAIL", f"{type(exc).__name__}: {exc}"))
    os.environ.setdefault("MAX_JOBS", "2")
    unique: dict[str, Path] = {}  # one compile per distinct source set (shrunk == full size)
    digest_of: dict[str, str] = {}
    for _label, path in built.items():
        text = path.read_text()
        digest = hashlib.sha256(text[text.index("_CPP_SOURCE"):text.index("_UNSET = object()")].encode()
                                ).hexdigest()
        digest_of[str(path)] = digest
        unique.setdefault(digest, path)
    compile_errors: dict[str, str] = {}
    start = time.time()
    with ProcessPoolExecutor(max_workers=12, mp_context=multiprocessing.get_context("spawn")) as pool:
        for path, seconds, error in pool.map(_compile, [str(p) for p in unique.values()]):
            print(f"  compiled {Path(path).parent.name} in {seconds:.0f} s {'FAILED' if error else ''}",
                  flush=True)
            if error:
                compile_errors[digest_of[path]] = error
    print(f"compiled {len(unique)} extensions in {time.time() - start:.0f} s", flush=True)
    for label, case, first, second in jobs:
        if label not in built:
            continue
        path = built[label]
        if digest_of[str(path)] in compile_errors:
            rows.append((label, "COMPILE FAIL", compile_errors[digest_of[str(path)]]))
        else:
            try:
                r = compare(case, path, first, second)
                speedup = r["ms_ref"] / max(r["ms_new"], 1e-9)
                detail = (f"err/tol {r['max_err_ratio']:.2f}  eager {r['ms_ref']:.3f} ms  "
                          f"ours {r['ms_new']:.3f} ms  x{speedup:.2f}  shapes {r['shapes']}")
                rows.append((label, "ok", detail))
            except Exception as exc:  # noqa: BLE001
                rows.append((label, "FAIL", f"{type(exc).__name__}: {str(exc)[:600]}\n"
                             + traceback.format_exc()[-1200:]))
        print(f"{rows[-1][0]:40s} {rows[-1][1]:13s} {rows[-1][2].splitlines()[0][:300]}", flush=True)
        (out_dir / "results.json").write_text(json.dumps(rows, indent=1))
        torch.cuda.empty_cache()
    width = max(len(r[0]) for r in rows)
    lines = [f"{label:{width}s}  {status:13s}  {detail}" for label, status, detail in rows]
    (out_dir / "table.txt").write_text("\n".join(lines))
    (out_dir / "results.json").write_text(json.dumps(rows, indent=1))
    print("\n==== summary\n" + "\n".join(line.split("\n")[0] for line in lines))
    failed = [r for r in rows if r[1] != "ok"]
    for label, status, detail in failed:
        print(f"\n==== {label}: {status}\n{detail}")
    print(f"\n{len(rows) - len(failed)}/{len(rows)} ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/ks_gpu_out")))
