"""Codegen specs (agents/codegen/spec.py dataclasses) <-> JSON, for Plan.spec.

The JSON is the dataclass fields plus `"type"`; tuples become lists, ElementwiseOp attrs a dict.
"""

from __future__ import annotations

from typing import Any

from kernelstitch.agents.codegen.spec import (
    ElementwiseOp,
    ElementwiseSpec,
    GemmSpec,
    ReductionSpec,
    TensorArg,
)

Spec = ElementwiseSpec | ReductionSpec | GemmSpec


def _arg(t: TensorArg | None) -> Any:
    return None if t is None else {"name": t.name, "dtype": t.dtype}


def _arg_from(d: Any) -> TensorArg | None:
    return None if d is None else TensorArg(str(d["name"]), d["dtype"])


def _op(op: ElementwiseOp) -> dict[str, Any]:
    return {"op": op.op, "args": list(op.args), "out": op.out, "attrs": dict(op.attrs)}


def _op_from(d: dict[str, Any]) -> ElementwiseOp:
    args = tuple(a if isinstance(a, str) else float(a) for a in d["args"])
    attrs = tuple(sorted((str(k), None if v is None else float(v))
                         for k, v in d.get("attrs", {}).items()))
    return ElementwiseOp(str(d["op"]), args, str(d["out"]), attrs)


def spec_to_json(spec: Spec) -> dict[str, Any]:
    if isinstance(spec, ElementwiseSpec):
        return {"type": "elementwise", "name": spec.name, "inputs": [_arg(t) for t in spec.inputs],
                "ops": [_op(o) for o in spec.ops], "outputs": list(spec.outputs),
                "out_dtype": spec.out_dtype}
    if isinstance(spec, ReductionSpec):
        return {"type": "reduction", "name": spec.name, "kind": spec.kind,
                "inputs": [_arg(t) for t in spec.inputs], "dim": spec.dim,
                "keepdim": spec.keepdim, "out_dtype": spec.out_dtype,
                "prologue": [_op(o) for o in spec.prologue], "prologue_out": spec.prologue_out,
                "epilogue": [_op(o) for o in spec.epilogue], "epilogue_out": spec.epilogue_out,
                "epilogue_inputs": list(spec.epilogue_inputs), "norm_ndim": spec.norm_ndim,
                "eps": spec.eps, "weight": spec.weight, "bias": spec.bias}
    if isinstance(spec, GemmSpec):
        return {"type": "gemm", "name": spec.name, "x": _arg(spec.x), "weight": _arg(spec.weight),
                "bias": _arg(spec.bias), "activation": spec.activation,
                "out_dtype": spec.out_dtype, "weight_layout": spec.weight_layout}
    raise TypeError(f"not a codegen spec: {spec!r}")


def spec_from_json(data: dict[str, Any]) -> Spec:
    kind = data.get("type")
    if kind == "elementwise":
        return ElementwiseSpec(
            name=data["name"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            ops=tuple(_op_from(o) for o in data["ops"]), outputs=tuple(data["outputs"]),
            out_dtype=data["out_dtype"])
    if kind == "reduction":
        return ReductionSpec(
            name=data["name"], kind=data["kind"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            dim=int(data["dim"]), keepdim=bool(data["keepdim"]), out_dtype=data["out_dtype"],
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""),
            epilogue=tuple(_op_from(o) for o in data.get("epilogue", [])),
            epilogue_out=data.get("epilogue_out", "acc"),
            epilogue_inputs=tuple(data.get("epilogue_inputs", [])),
            norm_ndim=int(data.get("norm_ndim", 1)), eps=float(data.get("eps", 1e-5)),
            weight=data.get("weight"), bias=data.get("bias"))
    if kind == "gemm":
        return GemmSpec(
            name=data["name"], x=_arg_from(data["x"]), weight=_arg_from(data["weight"]),
            bias=_arg_from(data.get("bias")), activation=data["activation"],
            out_dtype=data["out_dtype"], weight_layout=data.get("weight_layout", "nk"))
    raise ValueError(f"unknown spec type {kind!r}")
