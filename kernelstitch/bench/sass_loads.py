"""Loads in flight in a kernel's SASS, a static check on a machine without a GPU.

For each global load (LDG) of a kernel, in the machine code's linear order: how many loads the
thread has issued and not yet used when the first instruction reading this load's result comes.
A GPU warp issues in order, so an instruction that reads a pending load's register stalls the
warp until the load returns: a kernel whose every load is used (converted, computed, stored to
shared memory) before the next one issues keeps one load in flight a thread, and is bound by
memory latency far below the DRAM bandwidth at any occupancy.  Found this way: the
channels-last group_norm apply (each slot's load waited on by its GELU and store; 52% of the
H100's bandwidth on level2/79) and the narrow channels-last elementwise kernel (each load waited
on by its shared-memory store).

The linear order ignores branches, so loop back-edges and cold fallbacks blur the numbers; a
hot loop's pattern still shows in the largest count.  Needs nvcc and nvdisasm (the
`nvidia-cuda-nvdisasm` wheel of the dev extras carries it).

    python -m kernelstitch.bench.sass_loads kernel.cu [more.cu ...] [-I include_dir]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ARCH_FLAGS = ("-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-cubin")
_FUNCTION = re.compile(r"^//-+ \.text\.(\S+) -+$", re.M)
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(.*?);", re.M)
_OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?(\S+)\s*(.*)")
_REGISTER = re.compile(r"\bR(\d+)\b")


@dataclass(frozen=True)
class KernelLoads:
    """One kernel's global loads: for each, the loads in flight when its result is first used."""

    kernel: str  # the mangled name (`demangled()` for reading)
    in_flight: tuple[int, ...]  # per used load, in code order

    @property
    def most(self) -> int:
        return max(self.in_flight, default=0)

    @property
    def median(self) -> int:
        ordered = sorted(self.in_flight)
        return ordered[len(ordered) // 2] if ordered else 0

    def demangled(self) -> str:
        filt = shutil.which("c++filt")
        if filt is None:
            return self.kernel
        out = subprocess.run([filt], input=self.kernel, capture_output=True, text=True).stdout.strip()
        return re.sub(r"\(.*", "", out) or self.kernel


def _load_width(opcode: str) -> int:
    """32-bit registers a load writes."""
    return 4 if ".128" in opcode else 2 if ".64" in opcode else 1


def loads_in_flight(sass: str) -> list[KernelLoads]:
    """Per kernel of `sass` (nvdisasm -c output)."""
    parts = _FUNCTION.split(sass)
    kernels = []
    for name, body in zip(parts[1::2], parts[2::2]):
        pending: list[set[int]] = []  # registers of the loads issued and not yet read
        counts: list[int] = []
        for text in _INSTRUCTION.findall(body):
            match = _OPCODE.match(text.strip())
            if match is None:
                continue
            opcode, operands = match.groups()
            registers = [int(r) for r in _REGISTER.findall(operands)]
            is_load = opcode.startswith("LDG")
            # a store, reduction or atomic only reads its registers; other instructions write the first
            writes_first = not opcode.startswith(("ST", "RED", "ATOM")) and registers
            read = set(registers[1:] if writes_first else registers)
            used = [p for p in pending if p & read]
            counts.extend([len(pending)] * len(used))  # each had the pending ones beside it
            for regs in used:
                pending.remove(regs)
            if is_load and registers:
                pending.append(set(range(registers[0], registers[0] + _load_width(opcode))))
        kernels.append(KernelLoads(name, tuple(counts)))
    return kernels


def nvdisasm() -> str | None:
    """nvdisasm on PATH, else the one of the `nvidia-cuda-nvdisasm` wheel."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")  # the NVIDIA wheels' namespace package, not imported
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(root).glob("cu*/bin/nvdisasm")):
            return str(candidate)
    return None


class SassUnavailable(RuntimeError):
    """nvcc or nvdisasm is missing, or the source does not compile."""


def kernel_loads(cuda_source: str, include_dirs: tuple[Path, ...] = ()) -> list[KernelLoads]:
    """Compile `cuda_source` for sm_90a and analyse every kernel in it."""
    nvcc, disasm = shutil.which("nvcc"), nvdisasm()
    if nvcc is None or disasm is None:
        raise SassUnavailable(f"needs nvcc and nvdisasm (nvcc: {nvcc}, nvdisasm: {disasm})")
    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = Path(tmp) / "k.cu", Path(tmp) / "k.cubin"
        source.write_text(cuda_source)
        includes = [f"-I{d}" for d in include_dirs]
        done = subprocess.run([nvcc, *ARCH_FLAGS, *includes, "-o", str(cubin), str(source)],
                              capture_output=True, text=True)
        if done.returncode:
            raise SassUnavailable(f"nvcc failed: {done.stderr[-2000:]}")
        sass = subprocess.run([disasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    return loads_in_flight(sass)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help=".cu files")
    parser.add_argument("-I", dest="include", action="append", type=Path, default=[],
                        help="include directories (the coder's headers: agents/coder/codegen/cuda)")
    args = parser.parse_args(argv)
    for path in args.files:
        try:
            kernels = kernel_loads(path.read_text(), tuple(args.include) or (path.parent,))
        except SassUnavailable as err:
            print(f"{path}: {err}", file=sys.stderr)
            return 2
        print(f"{path}")
        for k in kernels:
            print(f"  {k.demangled()[:80]:80s} loads {len(k.in_flight):3d}  in flight at use: "
                  f"median {k.median}, most {k.most}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
