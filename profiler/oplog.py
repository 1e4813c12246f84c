"""Records each torch call a forward makes, with the user's source line, and brackets it with a
`record_function("ks:op<N>:L<line>")` range so every kernel in a torch.profiler trace can be tied
back to that call.

Why our own ranges: torch.profiler's Python tracer names frames by the function's first line
only (`problem.py(12): forward`), so `y = y * 2` and `y = y + 1` look alike.  A
TorchFunctionMode sees every torch function and Tensor method (operators included) at the call
site; the innermost frame in the problem file gives the line.  Calls made inside library
submodules (nn.Linear.forward -> F.linear) map to the user's line that called the submodule.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from typing import Any

RANGE_PREFIX = "ks:op"


def range_name(index: int, line: int | None) -> str:
    return f"{RANGE_PREFIX}{index}:L{line if line is not None else 0}"


def parse_range_name(name: str) -> tuple[int, int | None] | None:
    """'ks:op3:L14' -> (3, 14); anything else -> None."""
    if not name.startswith(RANGE_PREFIX):
        return None
    try:
        index_text, line_text = name[len(RANGE_PREFIX) :].split(":L", 1)
        line = int(line_text)
        return int(index_text), (line or None)
    except ValueError:
        return None


@dataclass
class TensorRef:
    id: str  # storage pointer + offset + shape: identifies the same tensor across calls
    shape: list[int]
    dtype: str
    nbytes: int


@dataclass
class OpRecord:
    index: int
    func: str  # "linear", "Tensor.__mul__", "softmax"
    line: int | None
    lines: list[int]  # problem-file frames, outermost first
    module: str | None  # qualified name of the innermost nn.Module on the stack
    inputs: list[TensorRef] = field(default_factory=list)
    outputs: list[TensorRef] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpRecord:
        return cls(
            **{
                **data,
                "inputs": [TensorRef(**t) for t in data["inputs"]],
                "outputs": [TensorRef(**t) for t in data["outputs"]],
            }
        )


_DTYPE_NAMES = {
    "torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16",
    "torch.float64": "fp64", "torch.int64": "int64", "torch.int32": "int32",
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
}  # fmt: skip


def short_dtype(dtype: Any) -> str:
    return _DTYPE_NAMES.get(str(dtype), str(dtype).replace("torch.", ""))


def _tensor_refs(value: Any) -> list[TensorRef]:
    import torch

    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return []
        ptr = value.untyped_storage().data_ptr() if value.numel() else 0
        ident = f"{ptr:x}+{value.storage_offset()}:{tuple(value.shape)}"
        nbytes = value.numel() * value.element_size()
        return [TensorRef(ident, list(value.shape), short_dtype(value.dtype), nbytes)]
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in _tensor_refs(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _tensor_refs(v)]
    return []


def _func_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    qual = getattr(func, "__qualname__", "") or ""
    if qual.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + name
    return name


def make_recorder(problem_file: str, module_names: dict[int, str]):
    """A TorchFunctionMode instance recording OpRecords for calls made from `problem_file`.

    `module_names` maps id(submodule) -> qualified name (model.named_modules()).
    """
    import torch
    from torch.overrides import TorchFunctionMode

    class OpRecorder(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[OpRecord] = []
            self.next_index = 0  # reset per forward so repeated forwards reuse the same indices
            self.keep = True  # record OpRecords (first forward only)
            # The caching allocator reuses freed storage: an output at a known address is a new
            # tensor, so ids carry a generation bumped on every write.
            self.generation: dict[str, int] = {}

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") == "__get__":  # attribute reads launch nothing
                return func(*args, **kwargs)
            lines, module = self._stack()
            index = self.next_index
            self.next_index += 1
            with torch.profiler.record_function(range_name(index, lines[-1] if lines else None)):
                out = func(*args, **kwargs)
            outputs = _tensor_refs(out)
            if outputs and self.keep:
                self.ops.append(
                    OpRecord(
                        index=index,
                        func=_func_name(func),
                        line=lines[-1] if lines else None,
                        lines=lines,
                        module=module,
                        inputs=self._versioned(_tensor_refs((args, kwargs)), written=False),
                        outputs=self._versioned(outputs, written=True),
                    )
                )
            return out

        def _versioned(self, refs: list[TensorRef], written: bool) -> list[TensorRef]:
            for ref in refs:
                if written:
                    self.generation[ref.id] = self.generation.get(ref.id, -1) + 1
                ref.id = f"{ref.id}#{self.generation.get(ref.id, 0)}"
            return refs

        @staticmethod
        def _stack() -> tuple[list[int], str | None]:
            lines: list[int] = []
            module = None
            frame = sys._getframe(2)
            while frame is not None:
                if frame.f_code.co_filename == problem_file:
                    lines.append(frame.f_lineno)
                if module is None:
                    owner = frame.f_locals.get("self")
                    if owner is not None and id(owner) in module_names:
                        module = module_names[id(owner)]
                frame = frame.f_back
            return lines[::-1], module

    return OpRecorder()
