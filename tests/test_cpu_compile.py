"""Without a GPU, generate compiles the built-in kernels with nvcc for sm_90a and says so, or
says plainly that nothing was compiled (issue 27)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernelstitch.agents.cpu_compile import compile_without_gpu

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the no-GPU path")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_generate_without_a_gpu_compiles_the_kernels_and_says_so(tmp_path, monkeypatch):
    example = tmp_path / "elementwise_chain.py"
    example.write_text((ROOT / "examples" / "elementwise_chain.py").read_text())
    env = {**__import__("os").environ, "KERNELSTITCH_CPU_NVCC": "1"}
    done = subprocess.run([sys.executable, "-m", "kernelstitch", "generate", str(example), "--no-search"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert "kernels compiled for sm_90a by nvcc (1 file(s)), not run: no GPU here" in done.stderr
    assert "compiling and verifying" not in done.stderr  # no compile stage that compiles nothing


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_kernel_that_does_not_compile_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTITCH_CPU_NVCC", "1")
    (tmp_path / "s1.cu").write_text("__global__ void k(float* p) { p[0] = undefined_name; }\n")
    result = compile_without_gpu(tmp_path)
    assert not result.compiled and result.note.startswith("the kernels do not compile for sm_90a: s1.cu:")
    assert "undefined_name" in result.note


def test_without_nvcc_or_kernels_it_says_what_it_did(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTITCH_CPU_NVCC", "1")
    assert compile_without_gpu(tmp_path) is None  # no kernels of ours: nothing to say
    (tmp_path / "s1.cu").write_text("__global__ void k() {}\n")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert compile_without_gpu(tmp_path).note == "kernels not compiled: no GPU and no nvcc here"
    monkeypatch.setenv("KERNELSTITCH_CPU_NVCC", "0")
    assert compile_without_gpu(tmp_path).note == "kernels not compiled (KERNELSTITCH_CPU_NVCC=0)"


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kernels_identical_but_for_their_step_name_compile_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTITCH_CPU_NVCC", "1")
    for step in ("s1", "s2"):
        (tmp_path / f"{step}.cu").write_text(f"__global__ void ks_{step}_k(float* p) {{ p[0] = 1.0f; }}\n")
    (tmp_path / "s3.cu").write_text("__global__ void ks_s3_k(float* p) { p[0] = 2.0f; }\n")
    result = compile_without_gpu(tmp_path)
    assert result.compiled and "(3 file(s), 2 distinct)" in result.note
