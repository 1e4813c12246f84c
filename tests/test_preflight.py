"""The bench preflight (kernelstitch.bench.preflight): every plan variant of a problem compiled
on a machine without a GPU, kernels through nvcc and bindings through g++ (CPU)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import ElementwiseOp, ElementwiseSpec, TensorArg, emit

from kernelstitch.bench.preflight import build, host_include_flags, main, preflight

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def _kernel():
    spec = ElementwiseSpec("pf", (TensorArg("x", "float32"), TensorArg("b", "float32")),
                           (ElementwiseOp("add", ("x", "b"), "t"), ElementwiseOp("relu", ("t",), "y")),
                           ("y",), "float32")
    return emit(spec)


@needs_nvcc
def test_every_variant_of_a_problem_builds(tmp_path):
    """An example's variants come back one a distinct program, each built by both compilers."""
    builds = list(preflight([EXAMPLES / "elementwise_chain.py"], tmp_path))
    assert builds and all(b.ok and b.kernels >= 1 for b in builds), builds
    assert all(b.host_checked for b in builds) == (host_include_flags(tmp_path / "h") is not None)


@needs_nvcc
def test_a_kernel_that_does_not_compile_is_reported_with_the_compiler_output(tmp_path):
    broken = replace(_kernel(), cuda=_kernel().cuda + "\n#error preflight check\n")
    host, spills, error = build([broken], tmp_path, None)
    assert error.startswith("nvcc: ") and "preflight check" in error and not host and spills == []


@needs_nvcc
def test_a_binding_that_does_not_compile_is_reported(tmp_path):
    flags = host_include_flags(tmp_path)
    if flags is None:
        pytest.skip("needs g++ and torch's c10/cuda headers")
    kernel = _kernel()
    broken = replace(kernel, binding=kernel.binding.replace("TORCH_CHECK(", "TORCH_CHEK(", 1))
    host, _, error = build([broken], tmp_path, flags)
    assert host and error.startswith("g++: ") and "TORCH_CHEK" in error


def test_missing_problem_files_are_named_with_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "absent.py")]) == 2
    assert "absent.py" in capsys.readouterr().err
    assert main([]) == 2
