"""Built-in coder: the generated ModelNew file (parses, same constructor, same state_dict keys,
declares exactly the torch ops it calls, passes the static rules) and its kernels compile with
plain nvcc without register spills (CI requirement)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import shutil
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conv_taps_reference import tap_means_reference
from kernelstitch.agents.coder.builtin import write_candidate
from kernelstitch.agents.inprocess import generate_builtin
from kernelstitch.agents.plan import Plan
from kernelstitch.agents.plan.host_ops import VIEW_OPS
from kernelstitch.agents.verifier.declaration import CandidateOrigin
from kernelstitch.agents.verifier.static_checks import check_files
from spill_scope import full_spill_check, nvcc_report

from kernelstitch.core.problem import load_problem

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CASES = [(p, None) for p in sorted(EXAMPLES.glob("*.py"))] + [
    (EXAMPLES / "user_style" / "fused_norm.py", None),
    (EXAMPLES / "user_style" / "encoder_gated_mlp.py", "GatedMLP"),
]
# -cubin: ptxas's report without the host compile (gcc); host code is still parsed and checked by
# nvcc's front end (a type error in a launcher fails).  Half this test's time went to gcc (2-core
# VM, empty nvcc cache: 32.5 s -> 15.2 s).
NVCC_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-cubin", "-O3",
              "-std=c++17", "--extended-lambda"]


def case_id(case) -> str:
    return case[0].stem + (f"::{case[1]}" if case[1] else "")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """case id -> (candidate, model_new.py path), every example generated once."""
    root = tmp_path_factory.mktemp("candidates")
    out = {}
    for case in CASES:
        folder = root / case_id(case).replace("::", "_")
        candidate = generate_builtin(case[0], case[1], folder / "model_new.py")
        out[case_id(case)] = (candidate, write_candidate(candidate, folder))
    return out


def import_file(path: Path):
    spec = importlib.util.spec_from_file_location(f"ks_test_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _init_params(tree: ast.Module, cls_name: str) -> list[str]:
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None)
    return [] if init is None else [a.arg for a in init.args.args[1:]]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_generated_file_structure(case, generated):
    candidate, path = generated[case_id(case)]
    tree = ast.parse(candidate.source)
    reference = ast.parse(case[0].read_text())
    ref_class = case[1] or "Model" if case[1] or any(
        isinstance(n, ast.ClassDef) and n.name == "Model" for n in reference.body) else next(
        n.name for n in reference.body if isinstance(n, ast.ClassDef))
    assert _init_params(tree, "ModelNew") == _init_params(reference, ref_class)
    module = import_file(path)
    # The plan is embedded and valid; its kernels are the extension's functions.
    assert Plan.from_json(module.KERNELSTITCH_PLAN) == candidate.plan
    assert module._FUNCTIONS == [k.function for k in candidate.kernels]
    # Exactly the ATen ops forward calls through torch.ops are declared (with their chains);
    # views (split, slice: no method spelling) launch nothing and are not declared.
    called = {f"aten::{m}" for m, overload in re.findall(r"torch\.ops\.aten\.(\w+)\.(\w+)\(", candidate.source)
              if f"aten.{m}.{overload}" not in VIEW_OPS}
    declared = module.KERNELSTITCH_TORCH_OPS
    assert declared == candidate.torch_ops
    assert called <= set(declared)
    assert all(kind in ("library_call", "pytorch_fallback") for kind in declared.values())
    assert not re.search(r"use_fast_math", candidate.source)
    if candidate.plan.steps and any(s.technique == "gemm_epilogue" for s in candidate.plan.steps):
        assert module._EXTRA_LDFLAGS == ["-lcublasLt"]
    files = sorted(p.name for p in (path.parent / "kernels").glob("*.cu"))
    assert files == sorted(f"{s.id}.cu" for s in candidate.plan.steps if s.is_kernel)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_static_rules_accept_the_candidate(case, generated):
    _, path = generated[case_id(case)]
    report = check_files(path, case[0], origin=CandidateOrigin.BUILTIN)  # its own, bound output
    assert report.reasons == []
    candidate = generated[case_id(case)][0]
    # its own cuBLASLt calls are what lets library kernels count as its work (assemble.py)
    has_gemm = any(s.technique == "gemm_epilogue" for s in candidate.plan.steps)
    assert ("cublasLtMatmul" in report.library_api_calls) == has_gemm, report.library_api_calls


@pytest.mark.parametrize("case", [c for c in CASES if c[0].stem in
                                  ("mlp", "conv2d_bias_relu", "fused_norm", "layernorm_residual")],
                         ids=case_id)
def test_model_new_adopts_parameters_without_submodule_forwards(case, generated):
    _, path = generated[case_id(case)]
    module = import_file(path)
    problem = load_problem(case[0], case[1])
    with torch.device("meta"):
        reference = problem.build()
        new = module.ModelNew(*problem.get_init_inputs())
    assert list(new.state_dict()) == list(reference.state_dict())
    for name, child in new.named_modules():
        if name:
            assert type(child).__name__ == "_Holder"
            with pytest.raises(NotImplementedError):
                child(torch.empty(1, device="meta"))


def test_constructor_defaults_are_the_reference_defaults(generated):
    _, path = generated["fused_norm"]
    module = import_file(path)
    assert module.ModelNew(8).get_parameter("weight").shape == (8,)
    built = module._build_reference([("hidden", 8), ("eps", module._UNSET)], (), (), [], {})
    assert built.eps == 1e-6
    assert module._build_reference([("hidden", 8), ("eps", 0.5)], (), (), [], {}).eps == 0.5


def test_views_fallbacks_and_outputs_in_the_program(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 32)
            def forward(self, x):
                y = self.fc(x.view(x.size(0), -1)).sum(dim=-1) + 1.0
                z = torch.topk(x.flatten(1), 3, dim=1).values
                return y.unsqueeze(1) * z, y, x
        def get_inputs():
            return [torch.randn(8, 4, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    src = candidate.source
    assert "v_x.view([v_sym_size_int_1, -1])" in src and "v_x.size(0)" in src
    assert "torch.ops.aten.topk.default(v_flatten, 3, 1)" in src
    assert candidate.torch_ops == {"aten::topk": "pytorch_fallback"}
    assert "return (v_mul, v_add, v_x.clone())" in src  # never return the caller's input
    assert "linear" not in {s.spec.get("type") for s in candidate.plan.steps}
    assert write_candidate(candidate, tmp_path / "out").exists()


def test_channels_last_conv_output_stays_nhwc_only_for_fused_elementwise_readers(tmp_path):
    example = generate_builtin(EXAMPLES / "conv2d_bias_relu.py", None, tmp_path / "a" / "model_new.py")
    assert example.plan.host.channels_last
    # the input through our tiled NCHW -> NHWC copy (PyTorch's x.contiguous(memory_format=...))
    assert "(_KS.ks_layout_swap(v_x, True), v_p_conv_weight" in example.source
    assert "ks_layout_swap(v_conv2d_nobias, False)" not in example.source  # the epilogue reads NHWC tiles
    assert "ks_layout_swap" in {k.function for k in example.kernels}
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, bias=False)
            def forward(self, x):
                y = self.conv(x)
                return y, y.flatten(1).sum(1)
        def get_inputs():
            return [torch.randn(2, 3, 16, 16)]
    """))
    src = generate_builtin(path, None, tmp_path / "b" / "model_new.py").source
    assert "_KS.ks_layout_swap(v_x, True)" in src
    assert "v_conv2d = _KS.ks_layout_swap(v_conv2d, False)" in src  # an output and a view read it


def test_a_channels_last_conv_output_reduced_over_channels_spatial_dims_or_all_stays_nhwc(tmp_path):
    """Reductions over dim 1 alone, over every spatial dim (global pooling) or over all but the
    batch read the NHWC memory with its channels last (the binding's re-view); global pooling is
    then planned with its column kernels (not `trailing`), and only in the channels-last
    variant.  A reduction over one spatial dim of several does not, and gets the copy back.
    (The global pooling reads a ReLU of the conv: of the conv itself, its taps' means replace it,
    rewrites._conv_spatial_mean.)"""
    from kernelstitch.agents.planner.variants import propose_variants

    sources, plans = {}, {}
    for label, reduce in (("channels", "torch.amin(y, dim=1, keepdim=True)"), ("spatial", "torch.relu(y).mean(dim=[2, 3])"),
                          ("all", "y.sum(dim=[1, 2, 3])"), ("height", "y.sum(dim=2)")):
        path = tmp_path / f"{label}.py"
        path.write_text(textwrap.dedent(f"""
            import torch
            import torch.nn as nn
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)
                def forward(self, x):
                    y = self.conv(x)
                    return torch.tanh({reduce})
            def get_inputs():
                return [torch.randn(2, 3, 16, 16)]
        """))
        result = generate_builtin(path, None, tmp_path / label / "model_new.py")
        assert result.plan.host.channels_last
        sources[label], plans[label] = result.source, result.plan
    for label in ("channels", "spatial", "all"):
        assert "_KS.ks_layout_swap(v_x, True)" in sources[label], label
        assert "ks_layout_swap(v_conv2d_nobias, False)" not in sources[label], label
    assert "ks_layout_swap(v_conv2d_nobias, False)" in sources["height"]

    def reduction(plan):
        return next(s.spec for s in plan.steps if (s.spec or {}).get("type") == "reduction")

    assert reduction(plans["spatial"])["trailing"] is False  # column kernels for the [N, S, C] view
    assert reduction(plans["all"])["trailing"] is True  # rows of S * C in either layout
    nchw = next(v for v in propose_variants(plans["spatial"].graph, None, plans["spatial"]) if v.name == "nchw")
    assert not nchw.plan.host.channels_last and reduction(nchw.plan)["trailing"] is True


def test_channels_last_readers_need_spatially_constant_operands(tmp_path):
    """A conv output stays NHWC for a group_norm and a softmax over the channels (their NHWC
    kernels) and a channel reduction whose other operands are constant along the spatial dims
    (conv bias, affine weights); a channel
    reduction that also reads a full NCHW tensor gets the copy back (the re-view would read that
    tensor through general strides)."""
    sources = {}
    for label, body, inputs in (
            ("group_norm", "torch.tanh(self.norm(y))", "torch.randn(2, 3, 16, 16)"),
            ("full_operand", "torch.sum(y * z, dim=1)", "torch.randn(2, 3, 16, 16), torch.randn(2, 8, 14, 14)"),
            ("softmax", "torch.sigmoid(torch.softmax(y, dim=1) * 2.0)", "torch.randn(2, 3, 16, 16)")):
        path = tmp_path / f"{label}.py"
        args = "x, z" if label == "full_operand" else "x"
        path.write_text(textwrap.dedent(f"""
            import torch
            import torch.nn as nn
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)
                    self.norm = nn.GroupNorm(4, 8)
                def forward(self, {args}):
                    y = self.conv(x)
                    return {body}
            def get_inputs():
                return [{inputs}]
        """))
        result = generate_builtin(path, None, tmp_path / label / "model_new.py")
        assert result.plan.host.channels_last
        sources[label] = result.source
    assert "_KS.ks_layout_swap(v_x, True)" in sources["group_norm"]
    assert ", False)" not in sources["group_norm"].split("_KS.ks_layout_swap(v_x, True)")[1]
    assert "ks_layout_swap(v_conv2d_nobias, False)" in sources["full_operand"]
    assert "_KS.ks_layout_swap(v_x, True)" in sources["softmax"]
    assert ", False)" not in sources["softmax"].split("_KS.ks_layout_swap(v_x, True)")[1]


def test_a_group_norm_keeps_nhwc_for_a_channel_reduction_and_the_conv_keeps_no_bias_pass(tmp_path):
    """level2/92's pattern: conv -> group_norm -> tanh -> hardswish, + the conv output, ->
    logsumexp over the channels.  The group_norm runs its NHWC kernels and keeps its output
    channels-last (keep_channels_last) because the logsumexp reads both NHWC tensors as rows of
    channels; nothing is copied back to NCHW.  The residual add, whose operand is the conv's bias
    add recomputed from the group_norm's own prologue inputs, stays out of the group_norm's
    epilogue (fusion.computed_from), so no bias add is left alone and the conv is called
    without its bias (it was cuDNN's extra pass).  Returned, the group_norm keeps NCHW."""
    results = {}
    for label, tail in (("lse", "torch.logsumexp(y + h, dim=1, keepdim=True)"), ("returned", "h")):
        path = tmp_path / f"{label}.py"
        path.write_text(textwrap.dedent(f"""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 16, 3)
                    self.norm = nn.GroupNorm(4, 16)
                def forward(self, x):
                    y = self.conv(x)
                    h = F.hardswish(torch.tanh(self.norm(y)))
                    return {tail}
            def get_inputs():
                return [torch.randn(2, 3, 16, 16)]
        """))
        results[label] = generate_builtin(path, None, tmp_path / label / "model_new.py")
        assert results[label].plan.host.channels_last
    lse = results["lse"]
    assert "ks_layout_swap(v_conv2d_nobias, False)" not in lse.source
    conv = next(s for s in lse.plan.steps if s.technique == "library_call")
    assert conv.nodes == ["conv2d_nobias"] and not any("bias" in i for i in conv.inputs)
    norm, reduce = (s for s in lse.plan.steps if (s.spec or {}).get("type") == "reduction")
    assert norm.spec["kind"] == "group_norm" and reduce.spec["kind"] == "logsumexp"
    assert norm.outputs[0] in reduce.inputs and "conv2d_nobias" in reduce.inputs

    def group_norm_binding(result):
        return next(k.binding for k in result.kernels if "group_norm" in k.function)

    assert "plan.nhwc_out = true" in group_norm_binding(lse)
    assert "plan.nhwc_out = false" in group_norm_binding(results["returned"])
    assert "ks_layout_swap(v_conv2d_nobias, False)" not in results["returned"].source


def test_an_elementwise_step_between_channels_last_convolutions_keeps_nhwc(tmp_path):
    """conv -> batch_norm -> ReLU -> conv -> ReLU: the batch_norm apply + ReLU step reads only NHWC
    tensors and feeds only a channels-last convolution, so its kernel keeps the output NHWC (no
    transpose out, the next conv's NHWC copy a no-op); the last step's output is the program's,
    contiguous; a step that also reads the NCHW input stays as it was."""
    path = tmp_path / "block.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
                self.bn = nn.BatchNorm2d(8)
                self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            def forward(self, x):
                y = torch.relu(self.bn(self.conv1(x)))
                return torch.relu(self.conv2(y) + x)
        def get_inputs():
            return [torch.randn(2, 8, 16, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert candidate.plan.host.channels_last
    kept = {k.function for k in candidate.kernels if "ks_full_channels_last({" in k.binding}
    elementwise = [s for s in candidate.plan.steps if s.technique == "fused_elementwise"]
    assert len(elementwise) == 2
    first, last = (candidate.kernel_for_step(s.id).function for s in elementwise)
    assert kept == {first}  # the last reads x (NCHW) and is the output
    assert "_KS.ks_layout_swap(v_relu, True)" in candidate.source  # a no-op on the NHWC output
    assert ", False)" not in candidate.source  # no copy back to NCHW anywhere


def test_a_dense_block_keeps_its_pooling_and_concatenation_channels_last(tmp_path):
    """stem conv -> ReLU -> max pool -> [batch_norm -> ReLU -> conv] -> cat with the pooled input
    -> batch_norm -> ReLU -> conv: the pooling and the concatenation take and give NHWC (every
    input of the cat stays NHWC), so only the last convolution's output, the program's, is
    copied back."""
    path = tmp_path / "dense.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Conv2d(3, 16, 3, padding=1)
                self.pool = nn.MaxPool2d(2)
                self.bn1 = nn.BatchNorm2d(16)
                self.conv1 = nn.Conv2d(16, 8, 3, padding=1)
                self.bn2 = nn.BatchNorm2d(24)
                self.conv2 = nn.Conv2d(24, 8, 1)
            def forward(self, x):
                p = self.pool(torch.relu(self.stem(x)))
                y = torch.cat([p, self.conv1(torch.relu(self.bn1(p)))], 1)
                return self.conv2(torch.relu(self.bn2(y)))
        def get_inputs():
            return [torch.randn(2, 3, 16, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert candidate.plan.host.channels_last
    assert any("g.keep_cl = cl && true;" in k.binding for k in candidate.kernels)  # the pooling's
    assert any("ks_inputs_channels_last(" in k.binding for k in candidate.kernels)  # the cat's
    backs = [line for line in candidate.source.splitlines() if ", False)" in line and "ks_layout_swap" in line]
    assert len(backs) == 1 and "v_conv2d_2" in backs[0]  # the output's, only


def test_a_dense_block_copies_its_input_to_nhwc_once(tmp_path):
    """level3/14's dense block: every layer concatenates forward's NCHW input with the NHWC conv
    outputs.  The input is copied to NHWC once at the start, so every cat, batch_norm apply and
    convolution stays channels-last (no copy per layer around the convs); the last cat, the
    program's output, transposes into NCHW through its tiled kernel."""
    from test_batch_norm import DENSE_BLOCK
    from test_norms import write

    path = write(tmp_path, DENSE_BLOCK)
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert candidate.plan.host.channels_last
    lines = candidate.source.splitlines()
    swaps = [line.strip() for line in lines if "ks_layout_swap(" in line and "= _KS." in line]
    assert swaps[0].startswith("v_x = _KS.ks_layout_swap(v_x, True)")
    assert not [line for line in swaps if ", False)" in line]  # nothing copied back
    cats = [s for s in candidate.plan.steps if (s.spec or {}).get("type") == "cat"]
    assert len(cats) == 4
    *inner, last = (candidate.kernel_for_step(s.id) for s in cats)
    assert all("ks_inputs_channels_last(" in k.binding for k in inner + [last])
    assert "_tr_kernel<" in last.cuda  # the output's cat transposes into NCHW


def test_an_inception_pooling_branch_reads_the_nhwc_copy_of_the_input(tmp_path):
    """level3/6: convolutions and a max pooling branch read forward's input.  The convolutions
    copy it to NHWC anyway, so it is copied once at the start and the pooling reads that copy
    and keeps its output NHWC for its own convolution (it pooled NCHW, then copied its output)."""
    path = tmp_path / "inception.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.b1 = nn.Conv2d(16, 8, 1)
                self.b3 = nn.Conv2d(16, 8, 3, padding=1)
                self.pool = nn.MaxPool2d(3, stride=1, padding=1)
                self.proj = nn.Conv2d(16, 8, 1)
            def forward(self, x):
                return torch.cat([self.b1(x), self.b3(x), self.proj(self.pool(x))], 1)
        def get_inputs():
            return [torch.randn(2, 16, 16, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert candidate.plan.host.channels_last
    swaps = [line.strip() for line in candidate.source.splitlines() if "_KS.ks_layout_swap(" in line]
    assert swaps[0].startswith("v_x = _KS.ks_layout_swap(v_x, True)")
    assert not [line for line in swaps if "v_x" in line and not line.startswith("v_x = ")]
    assert not [line for line in swaps if ", False)" in line]
    pool = next(s for s in candidate.plan.steps if (s.spec or {}).get("type") == "pool")
    assert "g.keep_cl = cl && true;" in candidate.kernel_for_step(pool.id).binding


def test_the_layout_fixed_point_walks_the_graph_readers_once(tmp_path, monkeypatch):
    """The channels-last fixed point asks every tensor's readers each round: the readers map is
    built once per plan (DenseNet201's generate spent 11 of its 32 s rebuilding it 813 times)."""
    from kernelstitch.agents.coder.layout import ChannelsLastReaders
    from kernelstitch.agents.plan.graph import Graph
    from test_batch_norm import DENSE_BLOCK
    from test_norms import write

    candidate = generate_builtin(write(tmp_path, DENSE_BLOCK), None, tmp_path / "out" / "model_new.py")
    calls = []
    original = Graph.users
    monkeypatch.setattr(Graph, "users", lambda self: calls.append(1) or original(self))
    layout = ChannelsLastReaders(candidate.plan, candidate.plan.graph)
    assert layout.kept_steps() and layout.transposing_cats()
    assert len(calls) == 1


def test_an_input_no_concatenation_needs_nhwc_stays_as_it_is(tmp_path):
    """A cat of forward's input with an NCHW tensor (no channels-last producer among its inputs)
    gains nothing from an NHWC copy of the input: none is made."""
    path = tmp_path / "plain.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.cat([x, torch.relu(x)], 1) * 2
        def get_inputs():
            return [torch.randn(2, 8, 16, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert "ks_layout_swap(v_x" not in candidate.source


def test_a_concatenation_into_the_output_reads_channels_last_convolutions_as_they_are(tmp_path):
    """A fire module (level3/17): two channels-last convolutions concatenated into the program's
    output, which stays NCHW.  The conv outputs stay NHWC (no copy back): the cat's binding
    takes its tiled transposing kernel for channels-last inputs into a contiguous output (the
    output-order walk read them at a stride of C values: 33.7 ms against 6.8 NCHW)."""
    path = tmp_path / "fire.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.squeeze = nn.Conv2d(3, 8, 1)
                self.e1 = nn.Conv2d(8, 16, 1)
                self.e3 = nn.Conv2d(8, 16, 3, padding=1)
            def forward(self, x):
                s = torch.relu(self.squeeze(x))
                return torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], 1)
        def get_inputs():
            return [torch.randn(2, 3, 16, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert candidate.plan.host.channels_last
    assert not [line for line in candidate.source.splitlines() if ", False)" in line and "ks_layout_swap" in line]
    assert "NHWC once for its 2 convolutions" in candidate.source
    cat = next(k for k in candidate.kernels if "_cat" in k.function)
    assert "ks_inputs_channels_last(" in cat.binding and "_tr_kernel<4><<<" in cat.cuda


def test_one_nhwc_copy_serves_every_convolution_of_a_tensor(tmp_path):
    """Three channels-last convolutions of the NCHW input (an Inception module's branches) share
    one NHWC copy of it instead of making three."""
    path = tmp_path / "branches.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Conv2d(4, 8, 1)
                self.b = nn.Conv2d(4, 8, 3, padding=1)
                self.c = nn.Conv2d(4, 8, 5, padding=2)
            def forward(self, x):
                return torch.cat([self.a(x), self.b(x), self.c(x)], 1)
        def get_inputs():
            return [torch.randn(2, 4, 16, 16)]
    """))
    candidate = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert candidate.plan.host.channels_last
    swaps = [line for line in candidate.source.splitlines() if "ks_layout_swap(v_x, True)" in line]
    assert len(swaps) == 1 and swaps[0].strip().startswith("_ks_nhwc_v_x = ")
    assert candidate.source.count("torch.ops.aten.conv2d.default(_ks_nhwc_v_x, ") == 3


# ---- nvcc: every kernel of every example compiles, no spills ----------------------------------

def _normalised(text: str) -> str:
    """Kernel text with its step-specific names masked (same kernel in two examples: one compile)."""
    return re.sub(r"ks_s\d+_", "ks_sN_", text)


def _compile(path: Path) -> tuple[Path, int, str]:
    # the object file is not used: only the report (cached by text, tests/spill_scope.py)
    returncode, output = nvcc_report([*NVCC_FLAGS, "-o", "/dev/null"], path, timeout_s=300)
    return path, returncode, output


def _heaviest_first(paths) -> list[Path]:
    """Most kernels (then most text) first: the two compile threads finish together (a softmax
    file's 8 kernels take minutes of ptxas on 2 cores, a GEMM launcher seconds)."""
    return sorted(paths, key=lambda p: (-p.read_text().count("__global__"), -p.stat().st_size, p.name))


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.timeout(1200)  # 22 nvcc runs: past the default 300 s on a loaded 2-core machine
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_every_example_kernel_compiles_without_spills(generated, tmp_path):
    """Every distinct kernel file of the examples.  Without KERNELSTITCH_SPILL_CHECK=all, the
    fused-reduction files are left to tests/test_codegen.py's representatives of their templates
    (tests/spill_scope.py): those are 10 files of 4-8 kernels, most of this test's ptxas time."""
    distinct: dict[str, Path] = {}
    for candidate, path in generated.values():
        reductions = {s.id for s in candidate.plan.steps if s.technique == "fused_reduction"}
        for cu in sorted((path.parent / "kernels").glob("*.cu")):
            if cu.stem in reductions and not full_spill_check():
                continue
            key = hashlib.sha256(_normalised(cu.read_text()).encode()).hexdigest()
            if key not in distinct:
                target = tmp_path / f"{len(distinct):02d}_{path.parent.name}_{cu.name}"
                target.write_text(cu.read_text())
                distinct[key] = target
    assert distinct, "no kernels generated"
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_compile, _heaviest_first(distinct.values())))
    problems = []
    for path, rc, log in results:
        spills = [m for m in re.findall(r"(\d+) bytes spill (?:stores|loads)", log) if m != "0"]
        if rc != 0 or "error" in log.lower() or spills:
            problems.append(f"{path.name}: rc={rc} spills={spills}\n{log[-1500:]}")
        if "__global__" in path.read_text():  # GEMM sources may hold only the launcher
            assert "Function properties" in log, f"{path.name}: no ptxas report\n{log[-500:]}"
    assert not problems, "\n\n".join(problems)


# ---- CPU semantics: the program + plan against the reference, kernels interpreted in torch -----

def _ew(op: str, args: list, attrs: dict):
    a = args[0]
    table = {
        "neg": lambda: -a, "abs": lambda: a.abs(), "relu": lambda: torch.relu(a),
        "sigmoid": lambda: torch.sigmoid(a), "tanh": lambda: torch.tanh(a),
        "exp": lambda: torch.exp(a), "log": lambda: torch.log(a), "sqrt": lambda: torch.sqrt(a),
        "rsqrt": lambda: torch.rsqrt(a), "reciprocal": lambda: 1.0 / a,
        "gelu": lambda: torch.nn.functional.gelu(a),
        "gelu_tanh": lambda: torch.nn.functional.gelu(a, approximate="tanh"),
        "silu": lambda: torch.nn.functional.silu(a), "square": lambda: a * a,
        "softplus": lambda: torch.nn.functional.softplus(a), "mish": lambda: torch.nn.functional.mish(a),
        "elu": lambda: torch.nn.functional.elu(a), "selu": lambda: torch.selu(a),
        "hardswish": lambda: torch.nn.functional.hardswish(a),
        "hardsigmoid": lambda: torch.nn.functional.hardsigmoid(a),
        "add": lambda: a + args[1], "sub": lambda: a - args[1], "mul": lambda: a * args[1],
        "div": lambda: a / args[1], "pow": lambda: torch.pow(a, args[1]),
        "xlogy": lambda: torch.xlogy(a, args[1]),
        "maximum": lambda: torch.maximum(torch.as_tensor(a), torch.as_tensor(args[1])),
        "minimum": lambda: torch.minimum(torch.as_tensor(a), torch.as_tensor(args[1])),
        "clamp": lambda: torch.clamp(a, attrs.get("min"), attrs.get("max")),
        "leaky_relu": lambda: torch.nn.functional.leaky_relu(a, attrs["negative_slope"]),
        "where": lambda: torch.where(a != 0, args[1], args[2]),
    }
    return table[op]()


def _run_ops(ops, env):
    for op in ops:
        args = [env[a] if isinstance(a, str) else a for a in op["args"]]
        env[op["out"]] = _ew(op["op"], args, op.get("attrs", {}))


_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def attention_reference(q, k, v, scale, causal, mask, relu=False, nonzero=False):
    """What the attention kernel computes, in q's dtype: softmax(q k^T * scale + mask) v with a
    row no key takes part in as zeros (as the kernel and SDPA's fused kernels give); `causal`:
    key c for query r >= c; `relu`: relu(scores) in place of softmax; `nonzero`: the mask's
    nonzero entries take part (a bool mask: its True ones; a float one is added)."""
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    if mask is not None:
        mask = mask != 0 if nonzero else mask
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.to(s.dtype)
    p = torch.relu(s) if relu else torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    return p @ v


def recurrent_reference(spec: dict, x, hx: list, weights: list):
    """What the persistent recurrent kernel computes, step by step as its blocks do: gate g of
    unit j is row g * H + j of W_ih / W_hh (LSTM i, f, g, o; GRU r, z, n with n's hidden part
    gated by r), the reverse direction walks t = T - 1 .. 0, each layer reads the one before's
    concatenated directions.  Returns aten.<cell>.input's outputs."""
    cell, layers, dirs = spec["cell"], spec["layers"], spec["directions"]
    per = 4 if spec["has_biases"] else 2
    seq = x.float().transpose(0, 1) if spec["batch_first"] else x.float()  # [T, B, features]
    h0 = hx[0].float()
    c0 = hx[1].float() if cell == "lstm" else None
    T, H = seq.shape[0], h0.shape[-1]
    hn, cn = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = (layer * dirs + d) * per
            w_ih, w_hh = weights[k].float(), weights[k + 1].float()
            b_ih = weights[k + 2].float() if per == 4 else torch.zeros(w_ih.shape[0])
            b_hh = weights[k + 3].float() if per == 4 else torch.zeros(w_ih.shape[0])
            h = h0[layer * dirs + d]
            c = c0[layer * dirs + d] if c0 is not None else None
            ys = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                gx, gh = seq[t] @ w_ih.t() + b_ih, h @ w_hh.t() + b_hh
                gate = lambda a, g: a[:, g * H:(g + 1) * H]  # noqa: E731
                if cell == "lstm":
                    i, f = torch.sigmoid(gate(gx, 0) + gate(gh, 0)), torch.sigmoid(gate(gx, 1) + gate(gh, 1))
                    g, o = torch.tanh(gate(gx, 2) + gate(gh, 2)), torch.sigmoid(gate(gx, 3) + gate(gh, 3))
                    c = f * c + i * g
                    h = o * torch.tanh(c)
                elif cell == "gru":
                    r, z = torch.sigmoid(gate(gx, 0) + gate(gh, 0)), torch.sigmoid(gate(gx, 1) + gate(gh, 1))
                    n = torch.tanh(gate(gx, 2) + r * gate(gh, 2))
                    h = (1 - z) * n + z * h
                else:
                    h = torch.tanh(gx + gh) if cell == "rnn_tanh" else torch.relu(gx + gh)
                ys[t] = h
            outs.append(torch.stack(ys))
            hn.append(h)
            cn.append(c)
        seq = torch.cat(outs, -1)
    y = seq.transpose(0, 1).contiguous() if spec["batch_first"] else seq
    if cell == "lstm":
        return y, torch.stack(hn), torch.stack(cn)
    return y, torch.stack(hn)


def interpret(spec: dict):
    """A torch implementation of one kernel spec (what the CUDA kernel must compute)."""
    def run(*tensors):
        if spec["type"] == "recurrent":  # called as (input, [h0(, c0)], [weights])
            return recurrent_reference(spec, *tensors)
        if spec["type"] == "gemm":
            x, w = tensors[0].float(), tensors[1].float()
            y = x @ (w.t() if spec["weight_layout"] == "nk" else w)
            if spec["bias"]:
                y = y + tensors[2].float()
            y = _ew(spec["activation"], [y], {}) if spec["activation"] != "none" else y
            return y.to(_DT[spec["out_dtype"]])
        if spec["type"] == "nll":
            x, t, lse = tensors[0].float(), tensors[1], tensors[2].float()
            counts = t != spec["ignore_index"]
            picked = x.gather(1, torch.where(counts, t, 0).unsqueeze(1)).squeeze(1)
            loss = torch.where(counts, lse - picked, 0.0)
            total = {"none": loss, "sum": loss.sum(), "mean": loss.sum() / counts.sum()}[spec["reduction"]]
            return total.to(_DT[spec["out_dtype"]])
        if spec["type"] == "contraction":  # fp32 products and sums, as the kernel
            return torch.einsum(spec["equation"], *(t.float() for t in tensors)).to(_DT[spec["out_dtype"]])
        if spec["type"] == "conv_epilogue":  # the conv in fp32, then the chain with its output as the operand
            x, w, *others = (t.float() for t in tensors)
            y = torch.nn.functional.conv2d(x, w, None, spec["stride"], spec["padding"])
            operands = others[:spec["operand"]] + [y] + others[spec["operand"]:]
            return interpret(spec["epilogue"])(*operands)
        if spec["type"] == "conv_taps":
            return tap_means_reference(tensors[0].float(), spec["kernel"], spec["stride"], spec["padding"],
                                       spec["dilation"], spec["output_padding"], spec["transposed"])
        if spec["type"] == "attention":  # what the flash kernel computes, in fp32 through the math path
            q, k, v = (t.float() for t in tensors[:3])
            return attention_reference(q, k, v, spec["scale"], spec["causal"], tensors[3] if spec["mask"] else None,
                                       spec.get("score") == "relu", spec.get("mask_nonzero", False)
                                       ).to(_DT[spec["out_dtype"]])
        env = {t["name"]: v.float() for t, v in zip(spec["inputs"], tensors)}
        if spec["type"] == "cat":
            parts = []
            for seg in spec["segments"]:
                local = dict(env)
                _run_ops(seg["ops"], local)
                shape = torch.broadcast_shapes(*(tensors[i].shape for i in seg["inputs"]))
                parts.append(local[seg["out"]].expand(shape))
            return torch.cat(parts, spec["dim"]).to(_DT[spec["out_dtype"]]).contiguous()
        if spec["type"] == "scan":
            _run_ops(spec["prologue"], env)
            x = env[spec["prologue_out"] or spec["inputs"][0]["name"]]
            x = x.expand(torch.broadcast_shapes(*(v.shape for v in tensors)))
            scan, d = (torch.cumsum if spec["kind"] == "sum" else torch.cumprod), spec["dim"]
            y = scan(x.flip(d) if spec["reverse"] else x, d)
            if spec.get("exclusive"):  # shift by one along d, the identity first
                first = torch.full_like(y.narrow(d, 0, 1), 0.0 if spec["kind"] == "sum" else 1.0)
                y = torch.cat((first, y.narrow(d, 0, y.shape[d] - 1)), d)
            y = y.flip(d) if spec["reverse"] else y
            return y.to(_DT[spec["out_dtype"]])
        if spec["type"] == "triangle":
            _run_ops(spec["prologue"], env)
            x = env[spec["prologue_out"] or spec["inputs"][0]["name"]]
            x = x.expand(torch.broadcast_shapes(*(v.shape for v in tensors)))
            return getattr(torch, spec["kind"])(x, spec["diagonal"]).to(_DT[spec["out_dtype"]])
        if spec["type"] == "arg_reduce":
            _run_ops(spec["prologue"], env)
            x = env[spec["prologue_out"] or spec["inputs"][0]["name"]]
            x = x.expand(torch.broadcast_shapes(*(v.shape for v in tensors)))
            return getattr(torch, spec["kind"])(x, spec["dim"], keepdim=spec["keepdim"])
        if spec["type"] == "pool":
            _run_ops(spec["prologue"], env)
            x = env[spec["prologue_out"] or spec["inputs"][0]["name"]]
            F, nd = torch.nn.functional, spec["nd"]
            if spec["kind"] == "adaptive_avg":
                y = getattr(F, f"adaptive_avg_pool{nd}d")(x, spec["output_size"])
            elif spec["kind"] == "max":
                y = getattr(F, f"max_pool{nd}d")(x, spec["kernel"], spec["stride"], spec["padding"],
                                                 spec["dilation"], ceil_mode=spec["ceil_mode"])
            else:
                extra = {"divisor_override": spec["divisor"] or None} if nd > 1 else {}
                y = getattr(F, f"avg_pool{nd}d")(x, spec["kernel"], spec["stride"], spec["padding"],
                                                 spec["ceil_mode"], spec["count_include_pad"], **extra)
            env["acc"] = y  # the epilogue reads the pooled value as acc
            _run_ops(spec["epilogue"], env)
            return env[spec["epilogue_out"] or "acc"].to(_DT[spec["out_dtype"]])
        if spec["type"] == "batch_stats":  # [2, C]: means, 1 / sqrt(biased variance + eps)
            _run_ops(spec["prologue"], env)
            x = env[spec["prologue_out"] or spec["inputs"][0]["name"]]
            if spec.get("groups"):  # [2, N * groups]: per (sample, group of channels)
                x = x.reshape(1, x.shape[0] * spec["groups"], -1)
            dims = [0] + list(range(2, x.dim()))
            var, mean = torch.var_mean(x, dims, correction=0)
            return torch.stack((mean, torch.rsqrt(var + spec["eps"])))
        if spec["type"] == "elementwise":
            _run_ops(spec["ops"], env)
            shape = torch.broadcast_shapes(*(v.shape for v in tensors))
            outs = [env[o].expand(shape).to(_DT[spec["out_dtype"]]).contiguous()
                    for o in spec["outputs"]]
            return outs[0] if len(outs) == 1 else outs
        _run_ops(spec["prologue"], env)
        x = env[spec["prologue_out"] or spec["inputs"][0]["name"]]
        kind, dim, keep = spec["kind"], spec["dim"], spec["keepdim"]
        if spec.get("dim_count", 1) > 1 and kind in ("sum", "mean", "amax", "amin", "logsumexp"):
            dim = tuple(range(dim, dim + spec["dim_count"]))  # a run of adjacent dims
        if kind == "layer_norm":
            shape = x.shape[x.dim() - spec["norm_ndim"]:]
            w = env[spec["weight"]] if spec["weight"] else None
            b = env[spec["bias"]] if spec["bias"] else None
            acc = torch.nn.functional.layer_norm(x, shape, w, b, spec["eps"])
        elif kind in ("softmax", "log_softmax"):
            acc = getattr(torch, kind)(x, dim)
        elif kind == "logsumexp":
            acc = torch.logsumexp(x, dim, keepdim=keep)
        else:
            acc = getattr(torch, kind)(x, dim, keepdim=keep)
        env["acc"] = acc
        _run_ops(spec["epilogue"], env)
        return env[spec["epilogue_out"]].to(_DT[spec["out_dtype"]])
    return run


def _layout_swap(t, channels_last: bool):
    """ks_layout_swap in torch: what PyTorch's copy gives."""
    layout = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    return t.contiguous(memory_format=layout) if channels_last else t.contiguous()


class _InterpretedExtension:
    def __init__(self, plan: Plan):
        self.functions = {s.spec["name"]: interpret(s.spec) for s in plan.steps if s.is_kernel}
        self.functions["ks_layout_swap"] = _layout_swap

    def __getattr__(self, name):
        return self.functions[name]


def interpreted_pair(candidate, program: Path, problem):
    """(reference, ModelNew) on the CPU: the generated program with every kernel interpreted in
    torch (`_InterpretedExtension`), sharing the reference's weights (seed 0)."""
    module = import_file(program)
    module._KS = _InterpretedExtension(candidate.plan)
    torch.manual_seed(0)
    reference = problem.build()
    new = module.ModelNew(*problem.get_init_inputs())
    new.load_state_dict(reference.state_dict())
    return reference, new


def interpreted_program(tmp_path: Path, path: Path, candidate):
    """(program, reference, ModelNew, inputs): `candidate` (of the problem file `path`, class
    Model) written into tmp_path, with every kernel interpreted in torch (interpreted_pair)."""
    program = Path(write_candidate(candidate, tmp_path))
    problem = load_problem(path, "Model")
    reference, new = interpreted_pair(candidate, program, problem)
    return program, reference, new, problem.inputs()


def interpreted_problem(tmp_path: Path, text: str):
    """(candidate, reference, ModelNew, inputs) of the problem source `text`, generated by the
    built-in coder into tmp_path with every kernel interpreted in torch (interpreted_program)."""
    path = tmp_path / "problem.py"
    path.write_text(text)
    candidate = generate_builtin(path, "Model", tmp_path / "model_new.py")
    _, reference, new, inputs = interpreted_program(tmp_path, path, candidate)
    return candidate, reference, new, inputs


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_program_matches_reference_with_interpreted_kernels(case, tmp_path):
    """The plan's semantics (fusion, op translation, value wiring, views, rewrites) on the CPU:
    every kernel replaced by a torch interpretation of its spec."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_compiler_gpu import shrunk

    first, _ = shrunk(case[0])
    consts = {k: max(3, v // 8) for k, v in first.items()}
    candidate = generate_builtin(case[0], case[1], tmp_path / "model_new.py", constants=consts)
    program = Path(write_candidate(candidate, tmp_path))
    problem = load_problem(case[0], case[1])
    for k, v in consts.items():
        setattr(problem.namespace, k, v)
    reference, new = interpreted_pair(candidate, program, problem)
    inputs = problem.inputs()
    with torch.no_grad():
        want, got = reference(*inputs), new(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        tol = 2e-2 if w.dtype != torch.float32 else 1e-4
        torch.testing.assert_close(g, w, atol=tol, rtol=tol)


SEQUENTIAL_CONVS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(4, 5, 1))

    def forward(self, x):
        return self.features(x)

def get_inputs():
    return [torch.randn(2, 3, 8, 8)]

def get_init_inputs():
    return []
'''


def test_the_forward_reads_tensors_from_a_table_walked_again_after_a_registration(tmp_path):
    """The generated forward reads parameters through `_t = self._ks_tensors()` (get_parameter
    per tensor per call cost ~4 us of Python each: 6.2 ms a call for DenseNet201 on the VM): the
    table is kept until a registration (a new Parameter assigned), and a `.data` swap needs none.
    Run on the CPU with the layout-swap kernel replaced by torch's own copy."""
    import types

    source = tmp_path / "convs.py"
    source.write_text(SEQUENTIAL_CONVS)
    candidate = generate_builtin(source, None, tmp_path / "model_new.py")
    path = write_candidate(candidate, tmp_path)
    assert "_t['features.0.weight']" in path.read_text() and "self.get_parameter(" not in path.read_text()
    spec = importlib.util.spec_from_file_location("ks_table_candidate", path)
    namespace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(namespace)
    namespace._KS = types.SimpleNamespace(ks_layout_swap=lambda x, to_cl: x.contiguous(
        memory_format=torch.channels_last if to_cl else torch.contiguous_format))
    torch.manual_seed(0)
    reference = load_problem(source, None).build()
    new = namespace.ModelNew()
    new.load_state_dict(reference.state_dict())
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(new._compute(x), reference(x))
        table = new._ks_tensors()
        assert new._ks_tensors() is table  # nothing registered: no walk
        conv = new.features._modules["0"]
        conv.weight.data = torch.randn_like(conv.weight)  # what .to() does: no registration
        reference.features[0].weight.data = conv.weight.data.clone()
        assert new._ks_tensors() is table
        torch.testing.assert_close(new._compute(x), reference(x))
        conv.weight = torch.nn.Parameter(torch.randn_like(conv.weight))  # a new Parameter registers
        reference.features[0].weight = torch.nn.Parameter(conv.weight.detach().clone())
        assert new._ks_tensors() is not table
        torch.testing.assert_close(new._compute(x), reference(x))
        # a swap straight into the module's dict (torch.func.functional_call does this, and
        # Module._apply for buffers): no registration, still read
        swapped = torch.nn.Parameter(torch.randn_like(conv.weight))
        conv._parameters["weight"] = swapped
        reference.features[0]._parameters["weight"] = torch.nn.Parameter(swapped.detach().clone())
        assert new._ks_tensors()["features.0.weight"] is swapped
        torch.testing.assert_close(new._compute(x), reference(x))
        weights = {"features.0.weight": torch.randn_like(conv.weight)}
        torch.testing.assert_close(torch.func.functional_call(new, weights, (x,)),
                                   torch.func.functional_call(reference, weights, (x,)))
        torch.testing.assert_close(new._compute(x), reference(x))  # its own weights again after


def test_global_pooling_of_a_kept_group_norm_output_gets_its_column_kernels(tmp_path):
    """A group_norm of an NHWC conv output may keep its output NHWC (layout.group_norm_keeps);
    the global pooling reading it then needs the column kernels (`trailing` False, planner's
    layout_readers), or its binding would copy the output back to NCHW first."""
    path = tmp_path / "gn_pool.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 16, 3)
                self.norm = nn.GroupNorm(4, 16)
            def forward(self, x):
                return torch.tanh(self.norm(self.conv(x))).mean(dim=[2, 3])
        def get_inputs():
            return [torch.randn(2, 3, 16, 16)]
    """))
    result = generate_builtin(path, None, tmp_path / "out" / "model_new.py")
    assert result.plan.host.channels_last
    reductions = [s.spec for s in result.plan.steps if (s.spec or {}).get("type") == "reduction"]
    assert [r["kind"] for r in reductions] == ["group_norm", "mean"]
    assert reductions[1]["trailing"] is False
    assert ", False)" not in result.source.split("_KS.ks_layout_swap(v_x, True)")[1]  # nothing copied back
