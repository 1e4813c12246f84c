"""The emitters' template mechanism (agents/coder/codegen/templates.py) and its files: strict
placeholders, every file under codegen/cuda/ used, the headers real headers, and the files found
as package data of an installed wheel."""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest
from kernelstitch.agents.coder.codegen import build_extension_sources, emit, templates
from kernelstitch.agents.coder.codegen.common import BLOCK_SCALAR_VALUES
from kernelstitch.agents.coder.codegen.reduction import ReductionVariant, emit_reduction
from kernelstitch.agents.coder.codegen.templates import TemplateError, render, substitute
from kernelstitch.agents.plan.kernel_spec import GemmSpec, ReductionSpec, TensorArg
from test_codegen import (
    arg_reduce_specs,
    attention_specs,
    batch_stats_merge_specs,
    batch_stats_specs,
    cat_specs,
    contraction_specs,
    conv_taps_specs,
    elementwise_specs,
    gemm_specs,
    mask_specs,
    nll_specs,
    pool_specs,
    recurrent_specs,
    reduction_specs,
    scan_specs,
    triangle_specs,
)
from test_conv_epilogue import nvcc_specs as conv_epilogue_nvcc_specs

ROOT = Path(__file__).resolve().parents[1]
CUDA_DIR = ROOT / "agents" / "coder" / "codegen" / "cuda"


def all_specs() -> list:
    """The test specs of every family, plus what they leave out: a GEMM without exact GELU, with
    and without bias.  (Every family: `rendered()` is per process, so a family missing here would
    pass only when another test of the same worker happened to render its files.)"""
    return elementwise_specs() + reduction_specs() + pool_specs() + batch_stats_specs() + batch_stats_merge_specs() + gemm_specs() + scan_specs() \
        + mask_specs() + cat_specs() + arg_reduce_specs() + triangle_specs() + nll_specs() + conv_taps_specs() + attention_specs() \
        + recurrent_specs() + contraction_specs() + [s for s in conv_epilogue_nvcc_specs() if s.name in ("ks_c0_0", "ks_c0_2")] + [
        GemmSpec("g_plain", TensorArg("x", "float32"), TensorArg("w", "float32"), None, "none", "float32"),
        GemmSpec("g_tf32", TensorArg("x", "float32"), TensorArg("w", "float32"), None, "relu", "float32",
                 precision="tf32"),
        GemmSpec("g_gelu_nobias", TensorArg("x", "float16"), TensorArg("w", "float16"), None, "gelu", "float16"),
        # a group_norm the coder keeps channels-last (its KEEP apply's launch)
        ReductionSpec("gn_keep", "group_norm", (TensorArg("x", "float32"), TensorArg("w", "float32"),
                                                TensorArg("b", "float32")), dim=1, keepdim=False, out_dtype="float32",
                      groups=4, weight="w", bias="b", trailing=True, keep_channels_last=True),
    ]


# ---------------------------------------------------------------- the mechanism


def test_substitute_fills_every_placeholder_once():
    assert substitute("a {{x}} b {{y}} {{x}}", {"x": "1", "y": 2}) == "a 1 b 2 1"
    # inside C++ braces, and a value that looks like a placeholder is not expanded again
    assert substitute("f({{{ptrs}}});", {"ptrs": "&a, &b"}) == "f({&a, &b});"
    assert substitute("{{x}}", {"x": "{{y}}"}) == "{{y}}"
    # C++ braces alone are text
    assert substitute("int a[2] = {0}; { {x} }", {}) == "int a[2] = {0}; { {x} }"


def test_missing_value_raises():
    with pytest.raises(TemplateError, match=r"missing values \['y'\]"):
        substitute("{{x}} {{y}}", {"x": "1"}, "t.cu")


def test_unused_value_raises():
    with pytest.raises(TemplateError, match=r"unused values \['z'\]"):
        substitute("{{x}}", {"x": "1", "z": "2"}, "t.cu")
    with pytest.raises(TemplateError, match="reduction/row.cu"):
        render("reduction/row.cu", name="r")  # names the file


def test_values_are_strings_or_ints():
    with pytest.raises(TemplateError, match="bool"):
        substitute("{{flag}}", {"flag": True})
    with pytest.raises(TemplateError, match="float"):
        substitute("{{x}}", {"x": 1.5})


def test_unknown_template_raises():
    with pytest.raises(TemplateError, match="no template"):
        render("reduction/nope.cu")


def test_final_newline_dropped_and_includes_inlined():
    text = templates.template("reduction/kernel.cu")
    assert not text.endswith("\n\n")  # the file's last line is empty: the text ends with one newline
    assert templates.source("reduction/kernel.cu").endswith(text + "\n")
    assert '#include "' not in text  # headers inlined; system headers stay includes
    assert text.count("#ifndef KS_CUDA_PRELUDE_H") == text.count("#ifndef KS_SHARED_TYPES_H") == 1


# ---------------------------------------------------------------- the files


def test_every_file_is_used_by_an_emitter():
    """Every file under codegen/cuda/ is rendered by some emitter or included by a rendered one,
    and every emitted text renders (render raises on any mismatch of file and values)."""
    from kernelstitch.agents.coder.codegen.conv_split import emit_split_cat
    from kernelstitch.agents.coder.codegen.layout_swap import emit_layout_swap

    kernels = [emit(spec) for spec in all_specs()]
    emit_split_cat()  # the 3xTF32 convolutions' splitting pass belongs to no spec
    emit_layout_swap()  # nor do the channels-last convolutions' layout copies
    used = set(templates.rendered())
    cpp, _, _ = build_extension_sources(kernels)  # the binding prelude: a header the assembly inlines
    assert cpp.startswith("\n" + templates.source("ks_binding.h"))
    used.add("ks_binding.h")
    for name in list(used):
        used |= _includes(name)
    assert set(templates.names()) - used == set()
    assert templates.names() == sorted(p.relative_to(CUDA_DIR).as_posix() for p in CUDA_DIR.rglob("*")
                                       if p.is_file() and p.suffix in templates.SUFFIXES)
    stray = [p for p in CUDA_DIR.rglob("*") if p.is_file() and p.suffix not in templates.SUFFIXES]
    assert stray == []


def _includes(name: str) -> set[str]:
    raw = (CUDA_DIR / name).read_text()
    out = set()
    for inc in templates._INCLUDE.findall(raw):
        target = (CUDA_DIR / name).parent.joinpath(inc).resolve().relative_to(CUDA_DIR).as_posix()
        out |= {target} | _includes(target)
    return out


def test_headers_hold_no_placeholders():
    for name in templates.names():
        if name.endswith((".h", ".cuh")):
            assert templates.placeholders(templates.source(name)) == set(), name
    assert BLOCK_SCALAR_VALUES == 16  # read from ks_shared_types.h, used by reduction/row.py
    assert "#define KS_BLOCK_SCALAR_VALUES 16 " in templates.source("ks_shared_types.h")


def test_microbench_knobs_change_only_their_kernel():
    """bench/microbench makes kernel variants through ReductionVariant: each knob changes only the
    part it names, and the default is what `emit` writes."""
    spec = ReductionSpec("ks_s1_softmax", "softmax", (TensorArg("x", "float32"),), 1, True, "float32")
    base = emit_reduction(spec).cuda
    assert emit_reduction(spec, ReductionVariant()).cuda == base == emit(spec).cuda
    fast = emit_reduction(spec, ReductionVariant(row_exp="__expf")).cuda
    assert "const float e = __expf(v[j][q] - ms);" in fast and "____expf" not in fast
    assert fast.replace("const float e = __expf(", "const float e = expf(") == base
    no_cluster = emit_reduction(spec, ReductionVariant(cluster=False)).cuda
    assert "_cluster" not in no_cluster and "ks_s1_softmax_cols<<<" in no_cluster
    accurate = emit_reduction(spec, ReductionVariant(cluster_fast_math=False)).cuda
    assert "b.y * expf(b.x - m)" in accurate and "ks_div_norm(expf(v[j][q] - ms[q]), s1[q])" in accurate
    assert "__launch_bounds__(TXV * TYR)\n" in emit_reduction(spec, ReductionVariant(cluster_min_blocks=0)).cuda
    assert "__launch_bounds__(TXV * TYR, 6)" in emit_reduction(spec, ReductionVariant(cluster_min_blocks=6)).cuda
    described = emit_reduction(spec, ReductionVariant(cluster_full_loads=False)).cuda
    assert ", true>" not in described.split("_launch(")[-1] and ", true>" in base.split("_launch(")[-1]


def test_microbench_generators_write_every_variant(tmp_path):
    bench = ROOT / "bench" / "microbench"
    for script in ("rows_gen.py", "cols_gen.py"):
        subprocess.run([sys.executable, script, str(tmp_path)], cwd=bench, check=True, capture_output=True,
                       timeout=120)
    programs = sorted(p.name for p in tmp_path.glob("*.cu"))
    assert len(programs) == 13, programs
    for p in tmp_path.glob("*.cu"):
        text = p.read_text()
        assert "{{" not in text and "int main()" in text and f'\\"variant\\": \\"{p.stem.split("__")[1]}\\"' in text


# ---------------------------------------------------------------- installed layout


def test_loader_reads_through_importlib_resources():
    node = resources.files("kernelstitch.agents.coder.codegen").joinpath("cuda", "reduction", "row.cu")
    assert node.read_text(encoding="utf-8") == (CUDA_DIR / "reduction" / "row.cu").read_text()


def test_package_data_globs_cover_every_file():
    """pyproject.toml's package-data for the codegen package matches every file `names` lists."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = config["kernelstitch.agents.coder.codegen"]
    for name in templates.names():
        path = f"cuda/{name}"
        assert any(fnmatch.fnmatch(path, g) or fnmatch.fnmatch(path, g.replace("**/", "")) for g in globs), name


@pytest.mark.slow
def test_wheel_ships_the_templates(tmp_path):
    """A wheel built from this tree holds every template, and the emitters imported from the
    unpacked wheel alone (python -S: no site-packages, so no editable install) emit the same text."""
    src = tmp_path / "src"
    src.mkdir()
    for item in ("setup.py", "pyproject.toml", "README.md", "kernelstitch", "agents", "server", "profiler"):
        (shutil.copytree if (ROOT / item).is_dir() else shutil.copy)(
            ROOT / item, src / item, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (ROOT / item).is_dir() else {}))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "No module named pip" in proc.stderr:
        pytest.skip("pip is not installed")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = glob.glob(str(tmp_path / "dist" / "*.whl"))
    with zipfile.ZipFile(wheel) as z:
        shipped = {n for n in z.namelist() if n.startswith("kernelstitch/agents/coder/codegen/cuda/")}
        z.extractall(tmp_path / "site")
    assert shipped == {f"kernelstitch/agents/coder/codegen/cuda/{n}" for n in templates.names()}
    script = (
        "import sys, hashlib; sys.path.insert(0, sys.argv[1]);"
        "from kernelstitch.agents.coder.codegen import emit, templates;"
        "from kernelstitch.agents.plan.kernel_spec import ReductionSpec, TensorArg;"
        "assert templates.__file__.startswith(sys.argv[1]), templates.__file__;"
        "k = emit(ReductionSpec('r', 'softmax', (TensorArg('x', 'float32'),), 1, False, 'float32'));"
        "print(hashlib.sha256((k.cuda + k.binding).encode()).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-S", "-c", script, str(tmp_path / "site")], capture_output=True,
                         text=True, timeout=120, check=True).stdout.strip()
    k = emit(ReductionSpec("r", "softmax", (TensorArg("x", "float32"),), 1, False, "float32"))
    assert out == hashlib.sha256((k.cuda + k.binding).encode()).hexdigest()


# ---------------------------------------------------------------- real headers


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_prelude_is_a_real_header(tmp_path):
    """The CUDA prelude compiles on its own, from the package folder (its include resolved by nvcc,
    not by the loader), twice in one unit (include guards)."""
    (tmp_path / "t.cu").write_text('#include "ks_prelude.cuh"\n#include "ks_prelude.cuh"\n'
                                   "__global__ void k(float* p) { p[0] = ks_gelu(ks_ld(p)); }\n")
    subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-c", "-o", "/dev/null", f"-I{CUDA_DIR}",
                    str(tmp_path / "t.cu")], check=True, capture_output=True, timeout=240)

