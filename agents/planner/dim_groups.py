"""How a reshape regroups a tensor's dims (consecutive runs of equal size products), on example
sizes and, checked symbol by symbol, on symbolic ones: what the rewrites that move an op across a
view, or read one reduction through a reshape, need to know."""

from __future__ import annotations

import math
import re

from kernelstitch.agents.plan.graph import TensorMeta


def dim_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[range, range]] | None:
    """How a reshape from `old` to `new` (example sizes) regroups dims: consecutive runs with
    equal products, e.g. (32, 64, 32, 64, 64) -> (32, 64, 131072) is ([0], [0]), ([1], [1]),
    ([2, 3, 4], [2]).  None where a size is 1 (its group would be ambiguous) or the products
    differ."""
    if 1 in old or 1 in new or math.prod(old) != math.prod(new) or not old:
        return None
    groups: list[tuple[range, range]] = []
    i = k = 0
    while i < len(old):
        i0, k0, po, pn = i, k, old[i], new[k]
        i, k = i + 1, k + 1
        while po != pn:
            if po < pn:
                if i == len(old):
                    return None
                po, i = po * old[i], i + 1
            else:
                if k == len(new):
                    return None
                pn, k = pn * new[k], k + 1
        groups.append((range(i0, i), range(k0, k)))
    return groups if k == len(new) else None


def symbolic_groups(old: TensorMeta, new: TensorMeta) -> list[tuple[range, range]] | None:
    """`dim_groups` of the example sizes, kept only where every group's sizes multiply to the
    same value for any input sizes: the symbolic sizes (``s77``, ``2*((s53//2))``) evaluated at
    several assignments of their symbols.  A literal size that equals an example size (``view(4,
    6, -1)`` of a batch whose example is 4) groups the example but not another batch."""
    groups = dim_groups(tuple(old.example_shape), tuple(new.example_shape))
    if groups is None:
        return None
    sizes = [*old.shape, *new.shape]
    symbols = sorted({m for v in sizes if isinstance(v, str) for m in re.findall(r"\b[a-z]\d+\b", v)})
    for seed in range(4):
        values = {name: 2 + (7 * k + 3 * seed + seed * seed) % 29 for k, name in enumerate(symbols)}
        for olds, news in groups:
            a = product([old.shape[d] for d in olds], values)
            b = product([new.shape[d] for d in news], values)
            if a is None or a != b:
                return None
    return groups


def product(sizes: list[int | str], values: dict[str, int]) -> int | None:
    """The product of `sizes` with the symbols at `values` (None: a size it cannot evaluate)."""
    total = 1
    for size in sizes:
        if isinstance(size, int):
            total *= size
            continue
        if not re.fullmatch(r"[a-z0-9_*+\-/() ]+", size):
            return None
        try:
            total *= int(eval(size, {"__builtins__": {}}, dict(values)))  # noqa: S307 - arithmetic over sizes
        except Exception:  # noqa: BLE001 - not arithmetic over the symbols
            return None
    return total
