"""The original module under CUDA-graph replay: a measured baseline of the search.

Launch overhead is what a CUDA graph removes and nothing else; timing the user's own module
replayed from a graph says how much of a variant's gain that host setting alone would give.  The
replay copies the inputs into the captured buffers and clones the outputs on every call, as the
built-in coder's graphed programs do, so both pay the same per-call costs.
"""

from __future__ import annotations

from typing import Any

import torch


class GraphedModule:
    """`module(*inputs)` replayed from one CUDA graph per input signature."""

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self._graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, list[Any], Any]] = {}

    def __call__(self, *inputs: Any) -> Any:
        key = tuple((tuple(t.shape), t.dtype, t.stride()) if isinstance(t, torch.Tensor) else t
                    for t in inputs)
        entry = self._graphs.get(key)
        if entry is None:
            static = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
            self.module(*static)  # warm-up outside capture (cuDNN/cuBLAS choose their kernels)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = self.module(*static)
            entry = self._graphs[key] = (graph, static, outputs)
        graph, static, outputs = entry
        for dst, src in zip(static, inputs):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        graph.replay()
        if isinstance(outputs, tuple):
            return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in outputs)
        return outputs.clone()
