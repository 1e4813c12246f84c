"""Preflight of a bench call on a machine without a GPU: every plan variant the measured search
would build for each problem, compiled the two ways the GPU machine compiles it: the kernels
through nvcc for sm_90a (with ptxas' spill report) and the bindings' host C++ through
g++ -fsyntax-only against this machine's torch headers.  A build error otherwise shows on the
lent GPU, where it costs device time and fails every program that carries the kernel family.

The GEMM bindings include cublasLt.h, which CPU machines lack: programs with GEMM steps have
those bindings left out of the host check (their kernels still go through nvcc).

    python -m kernelstitch.bench.preflight PROBLEM.py [...] [--list FILE --root DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernelstitch.agents.coder import codegen
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import build_extension_sources
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.variants import propose_variants
from kernelstitch.bench.sass_loads import ARCH_FLAGS

NVCC_FLAGS = (*ARCH_FLAGS, "-Xptxas", "-v")
_NO_SPILL = "0 bytes spill stores, 0 bytes spill loads"
CUDA_DIR = Path(codegen.__file__).parent / "cuda"  # the coder's headers and templates


@dataclass(frozen=True)
class VariantBuild:
    """One variant's program, as the two compilers saw it."""

    problem: str
    variant: str
    kernels: int  # kernel steps compiled
    host_checked: bool  # its bindings went through g++ (False: GEMM bindings, or no torch headers)
    spills: tuple[str, ...]  # ptxas' reports of the kernels that spill
    error: str  # the failing compiler's output tail; "" when both passed

    @property
    def ok(self) -> bool:
        return not self.error and not self.spills


def cuda_include() -> Path | None:
    """The CUDA runtime headers nvcc comes with."""
    nvcc = shutil.which("nvcc")
    candidates = [Path(nvcc).resolve().parent.parent / "include"] if nvcc else []
    candidates.append(Path("/usr/local/cuda/include"))
    return next((c for c in candidates if (c / "cuda_runtime_api.h").is_file()), None)


def host_include_flags(scratch: Path) -> list[str] | None:
    """-I flags to compile the bindings' host C++ against this machine's torch (a CPU wheel ships
    c10/cuda's headers but not the generated cuda_cmake_macros.h, stubbed under `scratch`), the
    CUDA runtime headers and the coder's prelude; None where any is missing."""
    import torch.utils.cpp_extension as cpp_extension

    torch_includes = [Path(p) for p in cpp_extension.include_paths()]
    cuda = cuda_include()
    if shutil.which("g++") is None or cuda is None or not (torch_includes[0] / "c10" / "cuda" / "CUDAStream.h").is_file():
        return None
    stub = scratch / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return [f"-I{p}" for p in [scratch / "stub", *torch_includes, sysconfig.get_paths()["include"], cuda,
                               CUDA_DIR]]


def _spilling(ptxas: str) -> list[str]:
    """The kernels (mangled names) ptxas -v reports spilling, with their spill line."""
    found, current = [], ""
    for line in ptxas.splitlines():
        if "Compiling entry function" in line:
            current = line.split("'")[1] if "'" in line else line
        elif "spill stores" in line and _NO_SPILL not in line:
            found.append(f"{current}: {line.strip()}")
    return found


def build(kernels: list[KernelSource], scratch: Path, host_flags: list[str] | None) -> tuple[bool, list[str], str]:
    """(host checked, the spilling kernels' reports, error tail) of one program's kernels."""
    cpp, cuda, _ = build_extension_sources(kernels)
    (scratch / "kernels.cu").write_text(cuda)
    done = subprocess.run(["nvcc", *NVCC_FLAGS, f"-I{CUDA_DIR}", "-o", str(scratch / "kernels.cubin"),
                           str(scratch / "kernels.cu")], capture_output=True, text=True, timeout=1800)
    if done.returncode:
        return False, [], "nvcc: " + done.stderr[-3000:]
    spills = _spilling(done.stderr)
    host = host_flags is not None and not any("cublasLt" in k.binding for k in kernels)
    if host:
        (scratch / "bindings.cpp").write_text(cpp)
        done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", *host_flags, str(scratch / "bindings.cpp")],
                              capture_output=True, text=True, timeout=900)
        if done.returncode:
            return True, spills, "g++: " + done.stderr[-3000:]
    return host, spills, ""


def preflight(problems: list[Path], scratch: Path) -> Iterator[VariantBuild]:
    """Every variant of every problem (propose_variants without a limit: the search's first
    round and its unranked variants), each distinct program compiled once."""
    host_flags = host_include_flags(scratch)
    seen: set[str] = set()
    for path in problems:
        try:
            variants = propose_variants(capture(path), limit=None)
        except Exception as err:  # a problem that does not plan: its message, the rest go on
            yield VariantBuild(path.stem, "(plan)", 0, False, (), f"{type(err).__name__}: {err}"[:3000])
            continue
        for variant in variants:
            try:
                candidate = code_builtin(variant.plan, path, scratch / "model_new.py")
            except Exception as err:
                yield VariantBuild(path.stem, variant.name, 0, False, (), f"{type(err).__name__}: {err}"[:3000])
                continue
            key = "\0".join(k.cuda + k.binding for k in candidate.kernels)
            if not candidate.kernels or key in seen:  # no kernel of ours, or a program already built
                continue
            seen.add(key)
            host, spills, error = build(candidate.kernels, scratch, host_flags)
            yield VariantBuild(path.stem, variant.name, len(candidate.kernels), host, tuple(spills), error)


def _problem_paths(args: argparse.Namespace) -> list[Path]:
    paths = list(args.problems)
    if args.list:
        names = [n.strip() for n in args.list.read_text().splitlines() if n.strip()]
        paths += [args.root / f"{n}.py" for n in names]
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", nargs="*", type=Path, help="problem files")
    parser.add_argument("--list", type=Path, help="a bench list (level2/NAME a line, as --only takes them)")
    parser.add_argument("--root", type=Path, default=Path(".kb/kernelbench"), help="the list's problem folder")
    args = parser.parse_args(argv)
    paths = _problem_paths(args)
    missing = [p for p in paths if not p.is_file()]
    if not paths or missing:
        print(f"no problem file{'s' if len(missing) > 1 else ''}: {', '.join(map(str, missing)) or '(none given)'}",
              file=sys.stderr)
        return 2
    if shutil.which("nvcc") is None:
        print("preflight needs nvcc (the CUDA toolkit)", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for b in preflight(paths, Path(tmp)):
            host = "g++ checked" if b.host_checked else "host not checked"
            print(f"{'ok ' if b.ok else 'BAD'} {b.problem} [{b.variant}]: {b.kernels} kernel steps, {host}, "
                  f"{len(b.spills)} spilling", flush=True)
            for report in b.spills:
                print("    spills: " + report, flush=True)
            if b.error:
                print("    " + b.error.replace("\n", "\n    "), flush=True)
            failed += not b.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
