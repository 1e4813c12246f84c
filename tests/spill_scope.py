"""How much emitted CUDA the nvcc spill checks compile (tests/test_codegen.py, test_coder.py).

`make test` (CI: 2 cores) compiles one representative of each kernel family: every template of
every family and every element width goes through ptxas, but of the reduction specs that differ
only in their combine operator (sum / mean / amax / amin, softmax / log_softmax) or in which
16-bit type they load, one.  Those variants are a third of the check's 20 CPU-minutes and share
their kernel templates with a representative.  `KERNELSTITCH_SPILL_CHECK=all` compiles every
spec and every example kernel: run it where cores are plenty (the GPU machine, README "GPU
tests")."""

from __future__ import annotations

import os

SPILL_CHECK_ENV = "KERNELSTITCH_SPILL_CHECK"

# Reduction specs of tests/test_codegen.py compiled in every run: each reduction template with a
# plain combine (sum), the online max/sum state (logsumexp), the normalising paths (softmax),
# layer_norm and group_norm, in fp32 and at 16 bits.
REPRESENTATIVE_REDUCTIONS = frozenset({
    "red_sum", "red_logsumexp", "red_softmax", "red_layer_norm", "red_group_norm",
    "red_softmax_bfloat16", "red_ln_float16", "red_sum_float16", "red_group_norm_f16",
})


def full_spill_check() -> bool:
    """Whether this run compiles every spec and every example kernel (KERNELSTITCH_SPILL_CHECK=all)."""
    return os.environ.get(SPILL_CHECK_ENV, "families") == "all"


# ---- nvcc reports cached by what determines them -------------------------------------------------
#
# A spill check's verdict is a function of the CUDA text, the nvcc flags and the nvcc build: the
# same three give the same ptxas report.  A passing report is kept under
# $KERNELSTITCH_NVCC_CACHE (default ~/.cache/kernelstitch/nvcc-reports; "0" turns it off), so a
# second `make test` in a checkout recompiles only the kernels a change touched (the check is
# ptxas-bound: ~10 CPU-minutes on 2 cores from cold).  A fresh machine (CI) compiles everything.

NVCC_CACHE_ENV = "KERNELSTITCH_NVCC_CACHE"
_NVCC_VERSION: list[str] = []


def _nvcc_version() -> str:
    import subprocess

    if not _NVCC_VERSION:
        done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False)
        _NVCC_VERSION.append(done.stdout)
    return _NVCC_VERSION[0]


def _cache_dir():
    from pathlib import Path

    where = os.environ.get(NVCC_CACHE_ENV, "")
    if where == "0":
        return None
    return Path(where) if where else Path.home() / ".cache" / "kernelstitch" / "nvcc-reports"


def nvcc_report(flags: list[str], path, timeout_s: float) -> tuple[int, str]:
    """(return code, stdout + stderr) of `nvcc *flags path`, from the cache when this text,
    these flags and this nvcc passed before."""
    import hashlib
    import json
    import subprocess

    text = path.read_text()
    key = hashlib.sha256(json.dumps([_nvcc_version(), flags, text]).encode()).hexdigest()
    folder = _cache_dir()
    entry = folder / f"{key}.json" if folder is not None else None
    if entry is not None and entry.is_file():
        try:
            cached = json.loads(entry.read_text())
            return int(cached["returncode"]), str(cached["output"])
        except (OSError, ValueError, KeyError):
            pass  # unreadable: compile again
    done = subprocess.run(["nvcc", *flags, str(path)], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    output = done.stdout + done.stderr
    if entry is not None and done.returncode == 0:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"returncode": 0, "output": output}))
            tmp.replace(entry)  # atomic: parallel workers never read half a file
        except OSError:
            pass  # a read-only home: no cache, same result
    return done.returncode, output


# What ptxas -v says of a kernel with no spills and no stack.
NO_SPILLS = "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"


def ptxas_kernels(log: str) -> dict[str, tuple[int, str]]:
    """ptxas -v's report per entry function of `log`: (registers, the stack and spill line, e.g.
    NO_SPILLS), keyed by the function's name less a `_kernel` suffix."""
    import re

    report = {}
    for entry in log.split("Compiling entry function")[1:]:
        length = re.match(r" '_Z(\d+)", entry)  # the mangled name's length prefix
        start = length.end()
        kernel = entry[start:start + int(length.group(1))].removesuffix("_kernel")
        registers = int(re.search(r"Used (\d+) registers", entry).group(1))
        spills = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", entry)
        report[kernel] = (registers, spills.group(0))
    return report

