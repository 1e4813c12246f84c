"""kernelstitch.core.nvcc: the split-compile option probed from the nvcc torch's builds run."""

from __future__ import annotations

from pathlib import Path

from kernelstitch.core import nvcc


def _fake_nvcc(folder: Path, help_text: str) -> Path:
    fake = folder / "nvcc"
    fake.write_text(f"#!/bin/sh\necho '{help_text}'\n")
    fake.chmod(0o755)
    return fake


def test_split_compile_flags_follow_the_nvcc_and_the_threads(tmp_path):
    new = _fake_nvcc(tmp_path, "--split-compile <number>  Perform compiler optimizations in parallel.")
    assert nvcc.split_compile_flags(4, str(new)) == ["--split-compile=4"]
    assert nvcc.split_compile_flags(1, str(new)) == []  # one thread: nothing to split
    assert nvcc.split_compile_flags(0, str(new)) == []
    old_folder = tmp_path / "old"
    old_folder.mkdir()
    old = _fake_nvcc(old_folder, "--threads <number>")
    assert nvcc.split_compile_flags(4, str(old)) == []
    assert nvcc.split_compile_flags(4, str(tmp_path / "missing")) == []


def test_a_command_line_nvcc_is_probed_whole(tmp_path):
    """PYTORCH_NVCC may name a compiler cache in front of nvcc: the probe runs the whole line."""
    cache = _fake_nvcc(tmp_path, "--split-compile <number>")
    assert nvcc.split_compile_flags(2, f"{cache} nvcc") == ["--split-compile=2"]


def test_torch_nvcc_prefers_pytorch_nvcc_then_cuda_home(monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setenv("PYTORCH_NVCC", "ccache /opt/cuda/bin/nvcc")
    assert nvcc.torch_nvcc() == "ccache /opt/cuda/bin/nvcc"
    monkeypatch.delenv("PYTORCH_NVCC")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/opt/cuda-13")
    assert nvcc.torch_nvcc() == "/opt/cuda-13/bin/nvcc"
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    assert nvcc.torch_nvcc() is None
    assert nvcc.split_compile_flags(8) == []  # no toolkit: nothing to probe
