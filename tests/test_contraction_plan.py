"""torch.einsum planned as one tiled contraction (planner/contraction.py) and the two exact
rewrites before it (planner/einsum_rewrites.py): the role split, the tile, which einsums stay
with torch, the identities each rewrite rests on, and level3/49 Mamba2's plan."""

from __future__ import annotations

import pytest
import torch
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.contraction import choose_tile, normalise_equation, split_roles
from test_norms import _HEADER, write

MAMBA_STATES = "bclhn,bhcl,bclhp->bchpn"
SIZES = {"b": 2048, "c": 2, "l": 64, "h": 8, "n": 16, "p": 64}


def _roles(equation: str, sizes: dict[str, int]):
    parts, out = normalise_equation(equation, equation.split("->")[0].count(",") + 1)
    return split_roles(parts, out, sizes)


def test_mamba_states_split_into_batch_m_n_and_summed_letters():
    roles = _roles(MAMBA_STATES, SIZES)
    s = roles.spec
    assert s.batch == "bch" and s.k == "l"
    assert {s.m, s.n} == {"n", "p"}  # one side X (p), the other B and the decay (n)
    assert len(set(s.sides)) == 2 and s.sides[0] == s.sides[1]  # B with the decay
    assert s.tile == choose_tile(roles.size(s.m), roles.size(s.n)) and s.tile in ((16, 64), (64, 16))


def test_a_reduction_over_a_product_keeps_an_operand_on_each_side():
    roles = _roles("bhc,bchpn->bhpn", {**SIZES, "c": 2})
    assert (roles.spec.batch, roles.spec.m, roles.spec.n, roles.spec.k) == ("bh", "", "pn", "c")
    assert choose_tile(1, 64 * 16) == (1, 256)


@pytest.mark.parametrize("equation, nops, why", [
    ("b...i,bij->b...j", 2, "ellipsis"),
    ("iij,j->i", 2, "diagonal"),
    ("ij,jk->ik", 3, "operand"),
])
def test_equations_the_kernel_does_not_take_say_why(equation, nops, why):
    assert why in normalise_equation(equation, nops)


def test_an_implicit_output_is_the_letters_seen_once_in_order():
    assert normalise_equation("ji,jk", 2) == (["ji", "jk"], "ik")


@pytest.mark.parametrize("eq, shapes", [
    ("bhzc,bchpn->bzhpn", [(2, 3, 4, 4), (2, 4, 3, 5, 6)]),
    ("ij,jk->ik", [(5, 7), (7, 3)]),
])
def test_a_selected_output_row_is_the_einsum_of_selected_operands(eq, shapes):
    """select_through_einsum's proof obligation: every output element sums the same terms."""
    ops = [torch.randn(*s, dtype=torch.float64) for s in shapes]
    full = torch.einsum(eq, *ops)
    out = eq.split("->")[1]
    for dim in range(len(out)):
        letter = out[dim]
        parts = eq.split("->")[0].split(",")
        picked = [o.select(p.index(letter), -1) if letter in p else o for o, p in zip(ops, parts, strict=True)]
        eq2 = ",".join(p.replace(letter, "") for p in parts) + "->" + out.replace(letter, "")
        torch.testing.assert_close(full.select(dim, -1), torch.einsum(eq2, *picked))


def test_zeros_concatenated_along_a_summed_letter_add_nothing():
    w, t = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 3, 3, 5, 6, dtype=torch.float64)
    cat = torch.cat([torch.zeros_like(t[:, :1]), t], dim=1)
    torch.testing.assert_close(torch.einsum("bhc,bchpn->bhpn", w, cat), torch.einsum("bhc,bchpn->bhpn", w[..., 1:], t))


MAMBA_TAIL = _HEADER + '''
class Model(nn.Module):
    def forward(self, w, s, x):
        states = torch.einsum("bclh,bclp->bchp", s, x)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        return torch.einsum("bhzc,bchp->bzhp", w, states)[:, -1]

def get_inputs():
    return [torch.randn(4, 3, 5, 3), torch.randn(4, 2, 16, 3), torch.randn(4, 2, 16, 8)]
'''


def _contractions(plan):
    return [s.spec for s in plan.steps if s.spec and s.spec.get("type") == "contraction"]


def test_mamba_tail_plans_two_contractions_and_no_concatenation(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, MAMBA_TAIL)))
    specs = _contractions(plan)
    assert [s["equation"] for s in specs] == ["bclh,bclp->bchp", "bhc,bchp->bhp"]
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    assert not any(s.spec and s.spec.get("type") == "cat" for s in plan.steps)
    assert any("selection(s) of an einsum" in n for n in plan.notes)
    assert any("concatenated with zeros" in n for n in plan.notes)


LARGE_BMM = _HEADER + '''
class Model(nn.Module):
    def forward(self, a, b):
        return torch.einsum("bij,bjk->bik", a, b)

def get_inputs():
    return [torch.randn(4, 512, 512), torch.randn(4, 512, 512)]
'''


def test_a_compute_bound_einsum_stays_with_torch(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, LARGE_BMM)))
    assert not _contractions(plan)
    assert any("compute-bound as one contraction" in n for n in plan.notes)


def test_mamba_tail_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """The rewrites' wiring on the CPU: selected and sliced operands, the zeros left out."""
    from test_coder import interpreted_problem

    candidate, reference, new, inputs = interpreted_problem(tmp_path, MAMBA_TAIL)
    assert len(_contractions(candidate.plan)) == 2
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), rtol=1e-5, atol=1e-5)


MUTATED = _HEADER + '''
class Model(nn.Module):
    def forward(self, a, b):
        a = a * 2
        y = torch.einsum("ij,jk->ik", a, b)
        a.mul_(3)
        return y[1] + a.sum()

def get_inputs():
    return [torch.randn(4, 5), torch.randn(5, 6)]
'''


def test_no_einsum_rewrite_moves_a_read_past_an_in_place_write(tmp_path):
    """A select taken through the einsum would read `a` after `a.mul_(3)` (a review's repro)."""
    from test_coder import interpreted_problem

    candidate, reference, new, inputs = interpreted_problem(tmp_path, MUTATED)
    assert not any("selection(s) of an einsum" in n for n in candidate.plan.notes)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs))


PROMOTED = _HEADER + '''
class Model(nn.Module):
    def forward(self, t, b):
        c = torch.cat([torch.zeros(1, 6, device=t.device), t], dim=0)
        return torch.einsum("kn,km->nm", c, b)

def get_inputs():
    return [torch.randn(5, 6).half(), torch.randn(6, 3)]
'''


def test_zeros_that_promote_the_dtype_stay_in_the_concatenation(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, PROMOTED)))
    assert not any("concatenated with zeros" in n for n in plan.notes)


DOT = _HEADER + '''
class Model(nn.Module):
    def forward(self, a, b):
        return torch.einsum("ij,ij->", a, b)

def get_inputs():
    return [torch.randn(1024, 1024), torch.randn(1024, 1024)]
'''


def test_a_contraction_of_few_tiles_over_a_long_sum_stays_with_torch(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, DOT)))
    assert not _contractions(plan)
    assert any("too few to fill the GPU" in n for n in plan.notes)


def test_the_search_always_times_torch_einsum_beside_the_kernel(tmp_path):
    from kernelstitch.agents.planner.variants import propose_variants

    variants = propose_variants(capture(write(tmp_path, MAMBA_TAIL)), limit=1)
    names = [v.name for v in variants]
    assert "einsum-in-pytorch" in names
    plain = next(v for v in variants if v.name == "einsum-in-pytorch")
    assert not _contractions(plain.plan)
    assert any("einsum left to PyTorch (variant)" in n for n in plain.plan.notes)


def test_a_plan_from_before_the_pipelined_loop_became_the_only_one_still_reads(tmp_path):
    """Specs stored before 2026-12-07 may carry `"pipelined": true` (the search's former
    `contraction-pipelined` variant, now the only k loop): read, they emit the same kernel."""
    from kernelstitch.agents.coder.codegen import emit
    from kernelstitch.agents.plan.kernel_spec import spec_from_json, spec_to_json
    from kernelstitch.agents.planner.variants import UNRANKED_VARIANTS, propose_variants

    variants = {v.name: v for v in propose_variants(capture(write(tmp_path, MAMBA_TAIL)), limit=1)}
    assert "contraction-pipelined" not in variants and "contraction-pipelined" not in UNRANKED_VARIANTS
    stored = _contractions(variants["default"].plan)[0]
    assert "pipelined" not in stored
    old = spec_from_json({**stored, "pipelined": True})
    assert spec_to_json(old) == stored and emit(old).cuda == emit(spec_from_json(stored)).cuda
    assert "koff[2][NIN][BK]" in emit(old).cuda


DUCK_SIZED_EINSUM = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Parameter(torch.randn(2, 8, 5))

    def forward(self, x):
        xb = x.reshape(x.size(0), x.size(1) // 4, 4, x.size(2), x.size(3))
        cb = self.c.reshape(2, 2, 4, 5)
        y = torch.einsum("bcln,bcsn,bcshp->bclhp", cb, cb, xb)
        return y.reshape(2, 8, 3, x.size(3)) * 2

def get_inputs():
    return [torch.randn(2, 8, 3, 4)]
'''


def test_a_three_operand_einsum_keeps_the_input_sizes_dynamic_under_opt_einsum(tmp_path):
    """With opt_einsum installed (the GPU machine's image has it) torch.einsum asks it for an
    order with the traced sizes; export then fixed x's last size (4, equal to the block length)
    and the program reshaped to the captured shape (level3/48's rejection at d_head 67)."""
    pytest.importorskip("opt_einsum")
    assert torch.backends.opt_einsum.is_available()
    graph = capture(write(tmp_path, DUCK_SIZED_EINSUM))
    out = graph.node(graph.output_names()[0])
    einsum = next(n for n in graph.nodes if n.op == "aten.einsum.default")
    assert isinstance(einsum.outputs[0].shape[-1], str)  # p: x's last size, symbolic
    assert "path" not in einsum.kwargs
    assert isinstance(out.outputs[0].shape[-1], str)
