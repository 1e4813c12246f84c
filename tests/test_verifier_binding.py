"""The built-in coder's declaration is bound to the file it wrote (issue 21): it counts only for
the built-in origin and an unedited file; the coder's own output for every example passes the
static rules (no false positive from the indirect-name resolution)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from kernelstitch.agents.coder.builtin import write_candidate
from kernelstitch.agents.coder.wrapper import bind
from kernelstitch.agents.inprocess import generate_builtin
from kernelstitch.agents.verifier.declaration import (
    BINDING_NAME,
    DECLARATION_NAME,
    CandidateOrigin,
    binding_digest,
    is_bound,
    read_declaration,
)
from kernelstitch.agents.verifier.static_checks import check_files, check_source

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CASES = [(p, None) for p in sorted(EXAMPLES.glob("*.py"))] + [
    (EXAMPLES / "user_style" / "fused_norm.py", None),
    (EXAMPLES / "user_style" / "encoder_gated_mlp.py", "GatedMLP"),
]
CONV = EXAMPLES / "conv2d_bias_relu.py"  # keeps its convolution in cuDNN: a declared op
BINDING_LINE = re.compile(rf'^{BINDING_NAME} = "([0-9a-f]*)"$', re.MULTILINE)


def _id(case) -> str:
    return case[0].stem + (f"::{case[1]}" if case[1] else "")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("builtin")
    out = {}
    for case in CASES:
        folder = root / _id(case).replace("::", "_")
        candidate = generate_builtin(case[0], case[1], folder / "model_new.py")
        out[_id(case)] = (candidate, write_candidate(candidate, folder))
    return out


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_builtin_output_passes_the_static_rules_and_is_bound(case, generated):
    candidate, path = generated[_id(case)]
    report = check_files(path, case[0], case[1], CandidateOrigin.BUILTIN)
    assert report.reasons == [], report.reasons
    assert report.declared_torch_ops == candidate.torch_ops
    (value,) = BINDING_LINE.findall(candidate.source)
    assert value == binding_digest(candidate.source)
    # Untrusted, the same file is judged on what it calls: only a declared fallback is reuse.
    untrusted = check_files(path, case[0], case[1])
    assert untrusted.declared_torch_ops == {}
    if candidate.torch_ops:
        assert set(untrusted.codes()) == {"reuses_reference_op"}
        lines = candidate.source.splitlines()
        assert all("torch.ops.aten." in lines[r.line - 1] for r in untrusted.reasons)
    else:
        assert untrusted.reasons == []


@pytest.fixture(scope="module")
def conv_source(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("conv") / "model_new.py"
    source = generate_builtin(CONV, None, out).source
    assert "torch.ops.aten.conv2d.default(" in source and DECLARATION_NAME in source
    return source


def _check(source: str, origin: CandidateOrigin = CandidateOrigin.BUILTIN):
    return check_source(source, CONV.read_text(), "Model", origin)


def test_the_declaration_counts_only_for_the_builtin_origin(conv_source):
    trusted = _check(conv_source)
    assert trusted.reasons == [] and "aten::conv2d" in trusted.declared_torch_ops
    untrusted = _check(conv_source, CandidateOrigin.UNTRUSTED)
    assert untrusted.codes() == ["reuses_reference_op"] and untrusted.declared_torch_ops == {}
    assert untrusted.reasons[0].detail["op"] == "conv2d"


def test_a_one_character_edit_of_the_declaration_breaks_the_binding(conv_source):
    edited = conv_source.replace("'aten::conv2d': 'library_call'",
                                 "'aten::conv2d': 'library_calL'", 1)
    assert edited != conv_source
    tree = ast.parse(edited)
    assert not is_bound(edited, tree)
    declaration = read_declaration(edited, tree, CandidateOrigin.BUILTIN)
    assert declaration.ops == {} and "does not match" in declaration.notes[0]
    assert _check(edited).codes() == ["reuses_reference_op"]


def test_an_edit_of_forward_with_the_header_kept_breaks_the_binding(conv_source):
    # the header (declaration + binding) untouched, one more PyTorch call in the program
    edited = conv_source.replace("        return v_add", "        return torch.relu(v_add)")
    assert edited != conv_source and not is_bound(edited, ast.parse(edited))
    reasons = _check(edited).reasons  # the added relu, and the no longer excused conv2d
    assert sorted((r.code, r.detail["op"]) for r in reasons) == [
        ("reuses_reference_op", "conv2d"), ("reuses_reference_op", "relu")]


def test_the_header_copied_into_another_file_binds_nothing(conv_source):
    declaration = re.search(rf"^{DECLARATION_NAME} = {{.*?^}}$", conv_source,
                            re.MULTILINE | re.DOTALL).group(0)
    header = declaration + "\n" + BINDING_LINE.search(conv_source).group(0)
    copy = "\n".join([
        "import torch", "import torch.nn as nn", "from _ext import ext", header,
        "class ModelNew(nn.Module):", "    def forward(self, x):",
        "        return torch.conv2d(ext.pad(x), ext.weight())", ""])
    assert _check(copy).codes() == ["reuses_reference_op"]
    assert _check(copy).declared_torch_ops == {}


def test_bind_fills_one_blank_line_and_survives_crlf():
    text = f'import torch\n{BINDING_NAME} = ""\nX = 1\n'
    bound = bind(text)
    assert is_bound(bound, ast.parse(bound))
    assert is_bound(bound.replace("\n", "\r\n"), ast.parse(bound))
    with pytest.raises(ValueError):
        bind("X = 1\n")
    # a second binding-like line (say, inside a string) makes the file unbound
    twice = bound + f'"""\n{BINDING_NAME} = "{"0" * 64}"\n"""\n'
    assert not is_bound(twice, ast.parse(twice))
