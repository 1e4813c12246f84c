"""Scripted model replies and a scripted Verifier for the LLM tests (reference:
examples/elementwise_chain.py, `y = clamp(relu(x * scale + shift) * 0.5, 0, 1)`)."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kernelstitch.agents.verifier.verdict import Reason, Stat, Timings, Verdict

SECRET = "sk-test-DO-NOT-LEAK-9f8e7d6c5b4a"
KEY_ENV = "KS_TEST_LLM_KEY"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "elementwise_chain.py"
CALL_NODES = ["mul", "add", "relu", "mul_1", "clamp"]

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void chain_kernel(const float* __restrict__ x, float* __restrict__ out,
                             float scale, float shift, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = fmaxf(x[i] * scale + shift, 0.0f) * HALF;
        out[i] = fminf(fmaxf(v, 0.0f), 1.0f);
    }
}

torch::Tensor chain(torch::Tensor x, double scale, double shift) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "contiguous CUDA input expected");
    auto out = torch::empty_like(x);
    long long n = x.numel();
    if (n == 0) return out;
    long long blocks = std::min<long long>((n + 255) / 256, 65535LL * 8);
    chain_kernel<<<(unsigned)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), (float)scale, (float)shift, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_FILE = '''"""ModelNew for elementwise_chain: one fused grid-stride kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r\'\'\'{cuda}\'\'\'

CPP_SOURCE = "torch::Tensor chain(torch::Tensor x, double scale, double shift);"


class _LazyExtension:
    def __init__(self):
        self._module = None

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._module is None:
            self._module = load_inline(name="ks_llm_chain_{tag}", cpp_sources=CPP_SOURCE,
                                       cuda_sources=CUDA_SOURCE, functions=["chain"])
        return getattr(self._module, name)


_EXT = _LazyExtension()


class ModelNew(nn.Module):
    def __init__(self, scale, shift):
        super().__init__()
        self.scale = scale
        self.shift = shift
{extra_init}
    def forward(self, x):
{forward}
# TIME_MS={time_ms}
'''

HONEST_FORWARD = "        return _EXT.chain(x.contiguous(), self.scale, self.shift)\n"


def candidate(time_ms: float = 0.5, *, half: str = "0.5f", cuda_extra: str = "",
              forward: str = HONEST_FORWARD, extra_init: str = "", tag: str = "a") -> str:
    cuda = _CUDA.replace("HALF", half).replace("    C10_CUDA_KERNEL_LAUNCH_CHECK();",
                                               cuda_extra + "    C10_CUDA_KERNEL_LAUNCH_CHECK();")
    return _FILE.format(cuda=cuda, forward=forward, extra_init=extra_init, time_ms=time_ms,
                        tag=tag)


GOOD = candidate(0.5, tag="good")
SLOW = candidate(2.5, tag="slow")
COMPILE_BUG = candidate(0.5, cuda_extra="    int bad = undefined_symbol;  // BUG\n", tag="bug")
WRONG = candidate(0.5, half="0.25f", tag="wrong")  # WRONG: scales by 0.25
HACK_TORCH = candidate(0.1, forward=(
    "        y = torch.relu(x * self.scale + self.shift)\n"
    "        return torch.clamp(y * 0.5, min=0.0, max=1.0)\n"), tag="hack1")
HACK_CACHE = candidate(0.1, extra_init="        self._cache = None\n", forward=(
    "        if self._cache is None:\n"
    "            self._cache = _EXT.chain(x.contiguous(), self.scale, self.shift)\n"
    "        return self._cache\n"), tag="hack2")


def stub_client(stub, records: list | None = None, *, environ: dict | None = None,
                **settings):
    """An LlmClient for the stub server (key in KEY_ENV, short backoff), closed when the stub
    stops."""
    from kernelstitch.agents.llm.client import LlmClient
    from kernelstitch.agents.llm.config import LlmConfig

    config = LlmConfig(**{"base_url": stub.base_url, "model": "stub-model",
                          "api_key_env": KEY_ENV, "backoff_s": 0.02, **settings})
    client = LlmClient(config, recorder=(records.append if records is not None else None),
                       environ={KEY_ENV: SECRET} if environ is None else environ)
    stub.on_stop.append(client.close)
    return client


def fenced(code: str, prose: str = "Here is the complete file.") -> str:
    return f"{prose}\n\n```python\n{code}```\n"


def line_of(code: str, needle: str) -> int:
    return next(k for k, line in enumerate(code.splitlines(), start=1) if needle in line)


def plan_json(nodes: list[str] | None = None, **extra: object) -> str:
    step = {"id": "k1", "technique": "fused_elementwise", "nodes": nodes or CALL_NODES,
            "description": "one grid-stride kernel, 256 threads, fused scale/shift/relu/clamp",
            "source_lines": [19, 20, 21, 22], "spec": {"type": "custom", "block": 256},
            "inputs": ["x"], "outputs": ["clamp"]}
    return json.dumps({"steps": [step], "host": {"cuda_graph": False, "reasons": ["big"]},
                       "notes": ["planned by the stub LLM"], **extra})


def timings(ms: float, eager_ms: float = 2.0) -> Timings:
    return Timings(
        eager_ms=Stat(eager_ms, eager_ms * 0.98, eager_ms * 1.02, 50), compiled_ms=None,
        candidate_ms=Stat(ms, ms * 0.97, ms * 1.03, 50), speedup_vs_eager=eager_ms / ms,
        speedup_vs_compiled=None, significant_vs_eager=True, significant_vs_compiled=False)


@dataclass
class ScriptedVerifier:
    """Stands in for the GPU Verifier: the built-in candidate gets `builtin` (a Verdict or
    None for accepted at `builtin_ms`); LLM files are judged by their markers (// BUG: compile
    error at that line, // WRONG: wrong output, else accepted at # TIME_MS)."""

    builtin_ms: float = 1.0
    builtin: Verdict | None = None
    calls: list[Path] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, reference: Path, candidate_path: Path, module: str,
                 cancel: threading.Event) -> Verdict:
        text = Path(candidate_path).read_text(encoding="utf-8")
        with self.lock:
            self.calls.append(Path(candidate_path))
        if "Generated by KernelStitch (built-in coder)" in text:
            return self.builtin or Verdict("accepted", timings=timings(self.builtin_ms),
                                           seeds=[1, 2, 3])
        if "// BUG" in text:
            line = line_of(text, "// BUG")
            diag = {"severity": "error", "message": 'identifier "undefined_symbol" is undefined',
                    "generated_file": "cuda.cu", "generated_line": 21, "line": line}
            return Verdict("rejected", [Reason(
                "compile_error", f"compilation failed: {diag['message']}", line,
                {"diagnostics": [diag], "compiler_output": "cuda.cu(21): error: ..."})],
                seeds=[1, 2, 3])
        if "0.25f" in text:
            return Verdict("rejected", [Reason(
                "wrong_output", "output 0 differs from the reference: max abs diff 0.25 "
                "(tolerance 1e-05) (seed 7, input shapes [[16384, 8192]])", None,
                {"max_abs_diff": 0.25, "mismatched_fraction": 0.5, "seed": 7})],
                seeds=[7, 8, 9])
        match = re.search(r"# TIME_MS=([0-9.]+)", text)
        ms = float(match.group(1)) if match else 1.0
        return Verdict("accepted", timings=timings(ms), seeds=[4, 5, 6])

    def llm_calls(self) -> list[Path]:
        return [p for p in self.calls if "llm" in p.parts]
