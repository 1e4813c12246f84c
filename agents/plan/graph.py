"""The captured forward as a typed, torch-free graph (the language server imports this).

A `Graph` is the ATen-level program `torch.export` produced, in program order: placeholders
(parameters, buffers, user inputs), calls, and the output values.  Every call records where it
came from in the user's file (1-based line, nn.Module path) so plans and findings can point at
source lines.  Shapes may be symbolic (`"s77"`, `"s27*s53"`) because capture marks every input
dimension dynamic; `example_shape` holds the sizes of the captured example.

JSON encoding of argument values: node references are `{"ref": name}`, dtypes
`{"dtype": "float32"}`, non-finite floats `{"float": "inf"}`, anything else torch-specific
`{"repr": text}`; lists, ints, finite floats, bools, strings and None stay as they are.

Tensor constants forward creates (`torch.tensor(0.5)`, lifted by torch.export) are placeholders
of kind `constant` whose `value` holds the contents inline (a number for a 0-d tensor, else
nested lists; dtype and shape are the node's output meta), so the coder can rebuild them.  Only
small ones: capture refuses a constant of more than `MAX_INLINE_CONSTANT_NUMEL` elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Union

SCHEMA_VERSION = 1
MAX_INLINE_CONSTANT_NUMEL = 4096  # tensor constants stored inline in the graph (and the plan)
PlaceholderKind = Literal["parameter", "buffer", "input", "constant"]


class GraphError(ValueError):
    """A graph (or its JSON) is malformed."""


@dataclass(frozen=True)
class NodeRef:
    node: str


@dataclass(frozen=True)
class DTypeConst:
    name: str  # "float32", "int64", ...


@dataclass(frozen=True)
class OpaqueConst:
    """A torch object with no JSON meaning (memory format, layout, device): kept as text."""

    text: str


Value = Union[NodeRef, DTypeConst, OpaqueConst, int, float, bool, str, None, list]  # noqa: UP007


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int | str, ...]  # int, or a symbolic size expression
    example_shape: tuple[int, ...]
    dtype: str  # torch dtype name without "torch.": float32, float16, bfloat16, int64, bool...

    @property
    def numel(self) -> int:
        return math.prod(self.example_shape)

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Placeholder:
    kind: PlaceholderKind
    target: str | None = None  # state_dict name for parameters/buffers
    index: int | None = None  # position in forward's arguments for user inputs
    persistent: bool = True
    # kind "constant": the tensor's contents (number for 0-d, else nested lists; finite floats
    # plain, non-finite ones as {"float": "inf"} in JSON)
    value: Any = None


@dataclass(frozen=True)
class Node:
    """One graph node.  `op` is the ATen overload (`aten.linear.default`), `placeholder`,
    `getitem`, or a Python operator on sizes (`operator.mul`)."""

    name: str
    op: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[TensorMeta | None, ...] = ()  # one per result; None for non-tensors
    multi_output: bool = False  # the op returns a tuple (outputs[i] is getitem i)
    symbol: str | None = None  # sym-int nodes: the size expression they evaluate to
    line: int | None = None  # 1-based line in the problem file
    module_path: str = ""  # nn_module_stack path of the innermost module ("fc", "" = top)
    module_type: str = ""
    placeholder: Placeholder | None = None
    synthetic: bool = False  # introduced by a planner rewrite, not by capture

    @property
    def meta(self) -> TensorMeta | None:
        return self.outputs[0] if self.outputs else None

    @property
    def is_placeholder(self) -> bool:
        return self.op == "placeholder"

    def refs(self) -> list[str]:
        """Names of the nodes this node reads (args and kwargs, nested lists included)."""
        found: list[str] = []
        _collect_refs(list(self.args) + list(self.kwargs.values()), found)
        return found

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """Positional-or-keyword argument lookup (export keeps calls as written)."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)


def _collect_refs(value: Any, out: list[str]) -> None:
    if isinstance(value, NodeRef):
        if value.node not in out:
            out.append(value.node)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_refs(item, out)


@dataclass
class Graph:
    module: str
    source_path: str
    nodes: list[Node]
    outputs: list[Any]  # values (NodeRefs or constants) forward returns, in order
    output_is_tuple: bool = False  # forward returns a tuple/list rather than one value
    dynamic: bool = True  # input sizes are symbolic (the program holds no baked sizes)
    notes: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self._index: dict[str, Node] = {}
        self._reindex()

    def _reindex(self) -> None:
        self._index = {}
        for n in self.nodes:
            if n.name in self._index:
                raise GraphError(f"duplicate node name {n.name!r}")
            self._index[n.name] = n

    # ---- queries -------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        try:
            return self._index[name]
        except KeyError:
            raise GraphError(f"no node named {name!r}") from None

    def has(self, name: str) -> bool:
        return name in self._index

    def placeholders(self) -> list[Node]:
        return [n for n in self.nodes if n.is_placeholder]

    def user_inputs(self) -> list[Node]:
        found = [n for n in self.nodes if n.placeholder and n.placeholder.kind == "input"]
        return sorted(found, key=lambda n: n.placeholder.index or 0)

    def calls(self) -> list[Node]:
        return [n for n in self.nodes if not n.is_placeholder]

    def users(self) -> dict[str, list[str]]:
        """node name -> names of nodes reading it (program order); outputs count as `<output>`."""
        table: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for ref in n.refs():
                table.setdefault(ref, []).append(n.name)
        out_refs: list[str] = []
        _collect_refs(self.outputs, out_refs)
        for ref in out_refs:
            table.setdefault(ref, []).append("<output>")
        return table

    def output_names(self) -> list[str]:
        found: list[str] = []
        _collect_refs(self.outputs, found)
        return found

    # ---- editing (planner rewrites) --------------------------------------------------------
    def with_edits(self, edits: list[GraphEdit]) -> Graph:
        """A copy with synthetic nodes inserted/replaced (see `GraphEdit`)."""
        nodes = list(self.nodes)
        for edit in edits:
            names = [n.name for n in nodes]
            if edit.node.name in names:
                nodes[names.index(edit.node.name)] = edit.node
            elif edit.before is not None:
                if edit.before not in names:
                    raise GraphError(f"edit inserts {edit.node.name!r} before unknown {edit.before!r}")
                nodes.insert(names.index(edit.before), edit.node)
            else:
                nodes.append(edit.node)
        return Graph(self.module, self.source_path, nodes, list(self.outputs),
                     self.output_is_tuple, self.dynamic, list(self.notes), self.schema_version)

    # ---- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "module": self.module,
            "source_path": self.source_path,
            "nodes": [node_to_json(n) for n in self.nodes],
            "outputs": [value_to_json(v) for v in self.outputs],
            "output_is_tuple": self.output_is_tuple,
            "dynamic": self.dynamic,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Graph:
        if not isinstance(data, dict):
            raise GraphError(f"graph JSON must be an object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise GraphError(f"graph schema_version {version!r} is not {SCHEMA_VERSION}")
        try:
            graph = cls(
                module=str(data["module"]),
                source_path=str(data["source_path"]),
                nodes=[node_from_json(n) for n in data["nodes"]],
                outputs=[value_from_json(v) for v in data["outputs"]],
                output_is_tuple=bool(data.get("output_is_tuple", False)),
                dynamic=bool(data.get("dynamic", True)),
                notes=[str(s) for s in data.get("notes", [])],
            )
        except KeyError as exc:
            raise GraphError(f"graph JSON lacks {exc.args[0]!r}") from None
        for n in graph.nodes:
            for ref in n.refs():
                if not graph.has(ref):
                    raise GraphError(f"node {n.name!r} reads unknown node {ref!r}")
        return graph


@dataclass(frozen=True)
class GraphEdit:
    """A planner rewrite: `node` replaces the node of the same name, or is inserted before
    `before` (appended when None)."""

    node: Node
    before: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"node": node_to_json(self.node), "before": self.before}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphEdit:
        return cls(node_from_json(data["node"]), data.get("before"))


# ---- JSON helpers --------------------------------------------------------------------------

def value_to_json(value: Any) -> Any:
    if isinstance(value, NodeRef):
        return {"ref": value.node}
    if isinstance(value, DTypeConst):
        return {"dtype": value.name}
    if isinstance(value, OpaqueConst):
        return {"repr": value.text}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, (list, tuple)):
        return [value_to_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise GraphError(f"cannot encode argument value {value!r} of type {type(value).__name__}")


def value_from_json(data: Any) -> Any:
    if isinstance(data, dict):
        if "ref" in data:
            return NodeRef(str(data["ref"]))
        if "dtype" in data:
            return DTypeConst(str(data["dtype"]))
        if "repr" in data:
            return OpaqueConst(str(data["repr"]))
        if "float" in data:
            return float(data["float"])
        raise GraphError(f"unknown encoded value {data!r}")
    if isinstance(data, list):
        return [value_from_json(v) for v in data]
    return data


def meta_to_json(meta: TensorMeta | None) -> Any:
    if meta is None:
        return None
    return {"shape": list(meta.shape), "example_shape": list(meta.example_shape), "dtype": meta.dtype}


def meta_from_json(data: Any) -> TensorMeta | None:
    if data is None:
        return None
    return TensorMeta(tuple(data["shape"]), tuple(int(s) for s in data["example_shape"]), str(data["dtype"]))


def node_to_json(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": node.name,
        "op": node.op,
        "args": [value_to_json(a) for a in node.args],
        "kwargs": {k: value_to_json(v) for k, v in node.kwargs.items()},
        "outputs": [meta_to_json(m) for m in node.outputs],
        "multi_output": node.multi_output,
        "line": node.line,
        "module_path": node.module_path,
        "module_type": node.module_type,
    }
    if node.symbol is not None:
        out["symbol"] = node.symbol
    if node.placeholder is not None:
        p = node.placeholder
        out["placeholder"] = {"kind": p.kind, "target": p.target, "index": p.index,
                              "persistent": p.persistent}
        if p.kind == "constant":
            out["placeholder"]["value"] = value_to_json(p.value)
    if node.synthetic:
        out["synthetic"] = True
    return out


def node_from_json(data: dict[str, Any]) -> Node:
    try:
        ph = data.get("placeholder")
        placeholder = None
        if ph is not None:
            if ph["kind"] not in ("parameter", "buffer", "input", "constant"):
                raise GraphError(f"node {data.get('name')!r}: unknown placeholder kind {ph['kind']!r}")
            placeholder = Placeholder(ph["kind"], ph.get("target"), ph.get("index"),
                                      bool(ph.get("persistent", True)),
                                      value_from_json(ph.get("value")))
        return Node(
            name=str(data["name"]),
            op=str(data["op"]),
            args=tuple(value_from_json(a) for a in data.get("args", [])),
            kwargs={str(k): value_from_json(v) for k, v in data.get("kwargs", {}).items()},
            outputs=tuple(meta_from_json(m) for m in data.get("outputs", [])),
            multi_output=bool(data.get("multi_output", False)),
            symbol=data.get("symbol"),
            line=data.get("line"),
            module_path=str(data.get("module_path", "")),
            module_type=str(data.get("module_type", "")),
            placeholder=placeholder,
            synthetic=bool(data.get("synthetic", False)),
        )
    except KeyError as exc:
        raise GraphError(f"node JSON lacks {exc.args[0]!r}: {data!r}") from None


def synthetic_fields(node: Node) -> dict:
    """Node fields of a rewrite's synthetic nodes standing for `node`: its line and module."""
    return {"line": node.line, "module_path": node.module_path, "module_type": node.module_type,
            "synthetic": True}


def channel_view(name: str, ref: NodeRef, meta: TensorMeta, spatial: int, common: dict) -> Node:
    """A per-channel vector `ref` ([C], `meta`) viewed as [C, 1, ...] to broadcast against an
    [N, C, *spatial] tensor (`common`: synthetic_fields of the node it stands for)."""
    return Node(name, "aten.view.default", (ref, [-1] + [1] * spatial), {},
                (TensorMeta((meta.shape[0],) + (1,) * spatial, (meta.example_shape[0],) + (1,) * spatial,
                            meta.dtype),), **common)


def renamed(node: Node, **changes: Any) -> Node:
    """dataclasses.replace, re-exported so planner code needs no dataclasses import."""
    return replace(node, **changes)


def scalar_constant(node: Node) -> int | float | bool | None:
    """The number a 0-d tensor-constant placeholder holds (None for anything else)."""
    ph = node.placeholder
    meta = node.meta
    if ph is None or ph.kind != "constant" or meta is None or meta.rank != 0:
        return None
    value = ph.value
    return value if isinstance(value, (bool, int, float)) else None
