"""Written-out attention read as scaled_dot_product_attention (agents/planner/attention.py):
which patterns match, that the generated program computes what the module computes (the SDPA
call runs in PyTorch, the other kernels interpreted on the CPU), and that the written-out form
stays a variant the search can time."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.planner.attention import SDPA_OP
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.variants import propose_variants
from kernelstitch.agents.verifier.declaration import CandidateOrigin
from kernelstitch.agents.verifier.static_checks import check_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

CAUSAL = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, n_embd=32, n_head=4, max_seqlen=16):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

def get_inputs():
    return [torch.randn(3, 16, 32)]

def get_init_inputs():
    return []
'''

# KernelBench's ReLUSelfAttention: ReLU in place of softmax (no library form: our kernel or as written)
RELU = CAUSAL.replace("att = F.softmax(att, dim=-1)", "att = F.relu(att)")

# 3-D operands, torch.bmm, a division for the scale, no mask
PLAIN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, q, k, v):
        s = torch.bmm(q, k.transpose(1, 2)) / 8.0
        return torch.bmm(torch.softmax(s, dim=-1), v)

def get_inputs():
    return [torch.randn(4, 10, 16), torch.randn(4, 12, 16), torch.randn(4, 12, 24)]

def get_init_inputs():
    return []
'''

# nn.MultiheadAttention: q scaled before q @ k^T, and head-averaged weights nobody reads
MHA = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4)

    def forward(self, x):
        out, _ = self.attn(x, x, x)
        return out

def get_inputs():
    return [torch.randn(12, 2, 32)]

def get_init_inputs():
    return []
'''

# the probabilities are an output too: the scores must exist in memory, no rewrite
READ_TWICE = PLAIN.replace("return torch.bmm(torch.softmax(s, dim=-1), v)",
                           "p = torch.softmax(s, dim=-1)\n        return torch.bmm(p, v), p")
# softmax over the queries, not the keys: not attention
OTHER_DIM = PLAIN.replace("dim=-1", "dim=1")


def _sdpa_steps(plan) -> list:
    """Steps computing an attention: our flash-attention kernel or PyTorch's SDPA call."""
    return [s for s in plan.steps if (s.spec or {}).get("op") == SDPA_OP or s.technique == "fused_attention"]


@pytest.mark.parametrize("text, masked, kernel", [(CAUSAL, True, True), (PLAIN, False, False), (MHA, False, True),
                                                  (RELU, True, True)],
                         ids=["causal", "plain_value_dim_differs", "multihead_attention", "relu_attention"])
def test_written_out_attention_is_one_attention_step_with_the_modules_results(tmp_path, text, masked, kernel):
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(text))
    steps = _sdpa_steps(candidate.plan)
    # our kernel where it takes the attention (PLAIN's value head dim 24 differs from the key's
    # 16: PyTorch's SDPA call), the mask a tensor operand of either
    assert len(steps) == 1 and steps[0].technique == ("fused_attention" if kernel else "library_call")
    if kernel:
        assert (steps[0].spec["mask"] is not None) is masked and "_KS.ks_" in candidate.source
        # the tril buffer's `== 0` is read in the kernel (no comparison left to PyTorch)
        assert steps[0].spec["mask_nonzero"] is masked
        assert "pytorch_fallback" not in [s.technique for s in candidate.plan.steps]
    else:
        assert ("attn_mask=" in candidate.source) is masked
    assert not any((s.spec or {}).get("kind") == "softmax" for s in candidate.plan.steps)  # no softmax kernel
    assert any("read as" in n and "attention" in n for n in candidate.plan.notes)
    # the Verifier's static rules accept the program (the SDPA call declared as a library call)
    assert check_files(tmp_path / "model_new.py", tmp_path / "problem.py", origin=CandidateOrigin.BUILTIN).reasons == []
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("text", [READ_TWICE, OTHER_DIM], ids=["probabilities_returned", "softmax_over_queries"])
def test_patterns_that_are_not_sdpa_stay_written_out(tmp_path, text):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(text))
    plan = plan_builtin(capture(path))
    assert not _sdpa_steps(plan)


def test_the_written_out_form_is_a_variant_for_the_search(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(CAUSAL))
    graph = capture(path)
    variants = {v.name: v for v in propose_variants(graph, limit=8)}
    assert [s.technique for s in _sdpa_steps(variants["default"].plan)] == ["fused_attention"]
    # PyTorch's fused attention is the floor our kernel is timed against
    assert [s.technique for s in _sdpa_steps(variants["attention-in-pytorch"].plan)] == ["library_call"]
    written = variants["attention-written-out"].plan
    assert not _sdpa_steps(written)
    assert "fused_reduction" in [s.technique for s in written.steps]  # the softmax kernel


def test_relu_attention_has_no_library_form_and_stays_written_out_without_the_kernel(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(RELU))
    graph = capture(path)
    variants = {v.name: v for v in propose_variants(graph, limit=8)}
    steps = _sdpa_steps(variants["default"].plan)
    assert [s.spec["score"] for s in steps] == ["relu"]
    assert "attention-in-pytorch" not in variants  # nothing to call
    written = plan_builtin(graph, attention_kernels=False)
    assert not _sdpa_steps(written) and not any("ReLU attention" in n for n in written.notes)
