"""The nvcc report cache of the spill checks (tests/spill_scope.py): keyed by the text, the flags
and the nvcc build; only passing reports are kept; "0" turns it off."""

from __future__ import annotations

import subprocess

import spill_scope
from spill_scope import nvcc_report


class FakeNvcc:
    def __init__(self, returncode: int = 0):
        self.compiles, self.returncode, self.version = 0, returncode, "nvcc 13.0"

    def __call__(self, cmd, **_kw):
        if cmd[:2] == ["nvcc", "--version"]:
            return subprocess.CompletedProcess(cmd, 0, self.version, "")
        self.compiles += 1
        return subprocess.CompletedProcess(cmd, self.returncode, "",
                                           f"ptxas info: 0 bytes spill stores ({self.compiles})")


def _setup(monkeypatch, tmp_path, fake, cache="cache"):
    monkeypatch.setattr(subprocess, "run", fake)
    monkeypatch.setattr(spill_scope, "_NVCC_VERSION", [])
    monkeypatch.setenv(spill_scope.NVCC_CACHE_ENV, cache if cache == "0" else str(tmp_path / cache))
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    return source


def test_a_passing_report_is_reused_for_the_same_text_flags_and_nvcc(monkeypatch, tmp_path):
    fake = FakeNvcc()
    source = _setup(monkeypatch, tmp_path, fake)
    first = nvcc_report(["-c"], source, 60)
    assert nvcc_report(["-c"], source, 60) == first and fake.compiles == 1
    nvcc_report(["-c", "-O3"], source, 60)  # other flags
    source.write_text("__global__ void k2() {}\n")  # other text
    nvcc_report(["-c"], source, 60)
    assert fake.compiles == 3
    fake.version = "nvcc 13.1"
    monkeypatch.setattr(spill_scope, "_NVCC_VERSION", [])  # another nvcc build
    nvcc_report(["-c"], source, 60)
    assert fake.compiles == 4


def test_failures_are_never_cached_and_zero_turns_the_cache_off(monkeypatch, tmp_path):
    fake = FakeNvcc(returncode=1)
    source = _setup(monkeypatch, tmp_path, fake)
    assert nvcc_report(["-c"], source, 60)[0] == 1
    assert nvcc_report(["-c"], source, 60)[0] == 1 and fake.compiles == 2
    off = FakeNvcc()
    source = _setup(monkeypatch, tmp_path, off, cache="0")
    nvcc_report(["-c"], source, 60)
    nvcc_report(["-c"], source, 60)
    assert off.compiles == 2
