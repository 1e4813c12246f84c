"""The max pooling rewrite of planner/monotone.py: the prologue's monotone tail runs once per output
after the max.  Which ops move (and which must not), how the kernel fields change, that the
algebra holds in torch on windows with NaN, and that planned programs of KernelBench-like modules
match their reference on the CPU with every kernel interpreted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.plan.kernel_spec import ElementwiseOp  # noqa: E402
from kernelstitch.agents.planner.monotone import hoist_monotone_tail  # noqa: E402
from test_coder import _run_ops, interpreted_problem  # noqa: E402

E = ElementwiseOp


def _hoist(prologue, epilogue=(), epilogue_out="acc", planes=("b",), epi_inputs=(), taps=16):
    return hoist_monotone_tail(tuple(prologue), prologue[-1].out if prologue else "", tuple(epilogue),
                               epilogue_out, tuple(planes), tuple(epi_inputs), taps)


def test_level2_82s_chain_moves_from_the_tanh_on():
    """conv bias + b, tanh, * 2.0, + c (b, c per channel) over a 4 x 4 window: the tanh, the
    scale and the + c move (the moved c is read at every output); moving the conv bias add too
    would save 15 adds a value for one more read a value, which costs more: it stays."""
    ops = [E("add", ("x", "b"), "t0"), E("tanh", ("t0",), "t1"), E("mul", ("t1", 2.0), "t2"),
           E("add", ("t2", "c"), "t3")]
    got = _hoist(ops, planes=("b", "c"))
    assert [op.op for op in got.prologue] == ["add"] and got.prologue_out == "t0"
    assert [(op.op, op.args) for op in got.epilogue] == [("tanh", ("acc",)), ("mul", ("t1", 2.0)),
                                                         ("add", ("t2", "c"))]
    assert got.epilogue_out == "t3" and got.moved == ("tanh", "mul", "add")
    assert got.plane_inputs == ("b",) and got.epilogue_inputs == ("c",)


def test_a_whole_prologue_moves_and_the_windows_read_the_input():
    ops = [E("mul", ("x", 0.5), "t0"), E("sigmoid", ("t0",), "t1")]
    got = _hoist(ops, planes=(), taps=4)
    assert got.prologue == () and got.prologue_out == "" and got.epilogue[0].args == ("acc", 0.5)


@pytest.mark.parametrize("taps,moved", [(4, ("relu",)), (9, ("relu",)), (25, ("add", "relu"))])
def test_a_per_channel_operand_moves_only_where_the_window_pays_for_its_reads(taps, moved):
    """relu(x + b): the relu always pays; the add only where (taps - 1) adds outweigh b's read at
    each output."""
    got = _hoist([E("add", ("x", "b"), "t0"), E("relu", ("t0",), "t1")], taps=taps)
    assert got.moved == moved


def test_nothing_moves_where_nothing_pays():
    assert _hoist([E("add", ("x", "b"), "t0")], taps=9) is None  # 8 adds < one read an output
    assert _hoist([E("relu", ("x",), "t0")], taps=1) is None  # a 1 x 1 window


def test_the_tail_stops_at_an_op_that_dips_and_the_epilogue_reads_the_moved_result():
    """hardswish is not monotone: only the tanh after it moves; the original epilogue (mish of
    the pooled value) now reads the tanh's result."""
    ops = [E("sub", ("x", 0.5), "t0"), E("hardswish", ("t0",), "t1"), E("tanh", ("t1",), "t2")]
    got = _hoist(ops, epilogue=[E("mish", ("acc",), "o")], epilogue_out="o", taps=4)
    assert [op.op for op in got.prologue] == ["sub", "hardswish"] and got.prologue_out == "t1"
    assert [(op.op, op.args) for op in got.epilogue] == [("tanh", ("acc",)), ("mish", ("t2",))]
    assert got.epilogue_out == "o"


@pytest.mark.parametrize("op", [
    E("mul", ("x", -2.0), "t"),  # a negative factor turns max into min
    E("mul", ("x", "b"), "t"),  # a per-channel factor of unknown sign
    E("div", ("x", "b"), "t"),
    E("sub", (1.0, "x"), "t"),  # decreasing
    E("mul", ("x", "x"), "t"),  # the value twice
    E("add", ("x", float("inf")), "t"),  # not finite
    E("mul", ("x", float("nan")), "t"),
    E("leaky_relu", ("x",), "t", (("negative_slope", -0.5),)),
    E("gelu", ("x",), "t"), E("silu", ("x",), "t"), E("mish", ("x",), "t"), E("log", ("x",), "t"),
    E("sqrt", ("x",), "t"), E("abs", ("x",), "t"), E("neg", ("x",), "t"), E("square", ("x",), "t"),
    E("hardsigmoid", ("x",), "t"),  # monotone, but our fminf / fmaxf form maps NaN to 0
    E("leaky_relu", ("x",), "t", (("negative_slope", 0.0),)),  # -inf * 0 = NaN
    E("mul", ("x", 1e-50), "t"),  # 0 as an fp32 literal: inf * 0
    E("div", ("x", 1e300), "t"),  # an infinite fp32 literal, a zero reciprocal
    E("add", ("x", 1e39), "t"),  # past fp32's range
    E("add", ("x", "y"), "t"),  # a full-size operand: differs within a window
])
def test_ops_that_are_not_monotone_in_the_pooled_value_stay(op):
    assert _hoist([op], planes=("b",)) is None


def test_a_dilated_window_moves_nothing():
    """A dilated window can hold no input value (its max is -inf, as torch's): relu(-inf) = 0."""
    ops = [E("relu", ("x",), "t0")]
    assert hoist_monotone_tail(tuple(ops), "t0", (), "acc", (), (), 16, dilation_over_one=True) is None


def test_a_plane_operand_a_kept_op_reads_keeps_the_tail_in_place():
    ops = [E("mul", ("x", "b"), "t0"), E("add", ("t0", "b"), "t1")]  # b: both kinds of field
    assert _hoist(ops) is None


def _reference(ops, x, b):
    env = {"x": x, "b": b}
    _run_ops([{"op": op.op, "args": op.args, "out": op.out, "attrs": dict(op.attrs)} for op in ops], env)
    return env[ops[-1].out]


@pytest.mark.parametrize("chain", [
    [E("add", ("x", "b"), "t0"), E("tanh", ("t0",), "t1"), E("mul", ("t1", 2.0), "t2")],
    [E("relu", ("x",), "t0"), E("sigmoid", ("t0",), "t1"), E("div", ("t1", 3.0), "t2")],
    [E("sub", ("x", "b"), "t0"), E("clamp", ("t0",), "t1", (("max", 0.5), ("min", -0.25))),
     E("leaky_relu", ("t1",), "t2", (("negative_slope", 0.1),))],
    [E("softplus", ("x",), "t0"), E("elu", ("t0",), "t1"), E("maximum", ("t1", 0.3), "t2"),
     E("exp", ("t2",), "t3")],
])
def test_pooling_after_the_tail_equals_pooling_before_it_in_torch(chain):
    """max_pool(f(x)) == f(max_pool(x)) for the moved chains, with NaN taps and large values."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 13, 11) * 4
    x.view(-1)[::53] = float("nan")
    b = torch.randn(5, 1, 1)
    got = _hoist(chain, taps=1000)  # a window large enough that the whole chain moves
    assert got is not None and got.prologue == ()
    pool = torch.nn.functional.max_pool2d
    before = pool(_reference(chain, x, b), 3, 2, 1)
    after_env = {"acc": pool(x, 3, 2, 1), "b": b}
    _run_ops([{"op": op.op, "args": op.args, "out": op.out, "attrs": dict(op.attrs)} for op in got.epilogue],
             after_env)
    torch.testing.assert_close(after_env[got.epilogue_out], before, rtol=1e-6, atol=1e-6, equal_nan=True)


_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bias = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = {body}
        return {pool}


def get_inputs():
    return [torch.randn(2, 3, 21, 19)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("body,pool,moved", [
    ("torch.tanh(x) * 2.0 + self.bias", "nn.functional.max_pool2d(x, 4)", True),  # level2/82's
    ("nn.functional.hardswish(x - 0.5)", "nn.functional.mish(nn.functional.max_pool2d(x, 2))", False),
    ("torch.sigmoid(nn.functional.hardswish(x))", "torch.relu(nn.functional.max_pool2d(x, 3, 2, 1))", True),
    ("torch.tanh(x) * 2.0 + self.bias", "nn.functional.avg_pool2d(x, 4)", False),  # an average: never
    # kernel 2, padding 1, dilation 3: windows with no input value pool to -inf (relu would give 0)
    ("torch.relu(x)", "nn.functional.max_pool2d(x, 2, 1, 1, 3)", False),
])
def test_planned_programs_match_their_module(tmp_path, body, pool, moved):
    candidate, reference, new, inputs = interpreted_problem(tmp_path, _SOURCE.format(body=body, pool=pool))
    described = " ".join(step.description for step in candidate.plan.steps)
    assert ("after the max (monotone" in described) == moved, described
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), rtol=1e-5, atol=1e-5)
