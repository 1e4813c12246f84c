"""The problem format (kernelstitch.core.problem): static scanning, module resolution and loading."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from kernelstitch.core.problem import (
    ProblemError,
    load_problem,
    resolve_module,
    scan_source,
    split_target,
)


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _write(tmp_path: Path, text: str, name: str = "problem.py") -> Path:
    path = tmp_path / name
    path.write_text(_src(text), encoding="utf-8")
    return path


KERNELBENCH = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


def get_inputs():
    return [torch.ones(2, 3)]


def get_init_inputs():
    return [3.0]
"""


# --------------------------------------------------------------------------------------------
# scan_source


def test_scan_kernelbench_file():
    scan = scan_source(_src(KERNELBENCH))
    assert scan.error is None
    assert [m.name for m in scan.modules] == ["Model"]
    model = scan.module("Model")
    assert (model.line, model.forward_line, model.end_line) == (5, 10, 11)
    assert model.name_column == len("class ")
    assert (model.inputs_fn, model.init_inputs_fn) == ("get_inputs", "get_init_inputs")
    assert model.has_inputs
    assert scan.functions == {"get_inputs", "get_init_inputs"}


def test_scan_class_without_forward_or_inputs():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        if True:
            pass
        class   Odd(nn.Module):
            pass
        """)
    )
    # Only top-level classes count; this one has no forward and no inputs.
    odd = scan.module("Odd")
    assert odd.forward_line is None and not odd.has_inputs


def test_scan_ignores_plain_classes_and_nested_modules():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        class Config:
            pass
        class Helper(Config):
            pass
        def factory():
            class Inner(nn.Module):
                pass
            return Inner
        """)
    )
    assert scan.error is None
    assert scan.modules == ()


@pytest.mark.parametrize(
    "text, line",
    [
        ("import torch\n\nclass Model(nn.Module)\n    pass\n", 3),
        ("x = (1,\n", 1),
        ("def f():\n    return 1\n  y = 2\n", 3),
    ],
)
def test_scan_syntax_error_reports_line_and_never_raises(text, line):
    scan = scan_source(text)
    assert scan.modules == ()
    assert scan.error is not None
    assert scan.error.line == line
    assert scan.error.message.startswith("syntax error")
    assert scan.error.column >= 0


def test_scan_empty_source():
    scan = scan_source("")
    assert scan.error is None and scan.modules == ()


@pytest.mark.parametrize(
    "header, base",
    [
        ("import torch", "torch.nn.Module"),
        ("from torch import nn", "nn.Module"),
        ("from torch.nn import Module", "Module"),
        ("from torch import nn as tnn", "tnn.Module"),
        ("import torch.nn as neural", "neural.Module"),
        ("import torch as th", "th.nn.Module"),
        ("from torch.nn import Module as Base", "Base"),
    ],
)
def test_scan_module_base_spellings_and_aliases(header, base):
    scan = scan_source(
        f"{header}\n\nclass Net({base}):\n    def forward(self, x):\n        return x\n"
    )
    assert [m.name for m in scan.modules] == ["Net"]


def test_scan_unrelated_alias_is_not_a_module():
    scan = scan_source("import numpy as nn\nimport foo as tnn\nclass A(tnn.Module):\n    pass\n")
    assert scan.modules == ()


def test_scan_module_through_local_class_in_any_order():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        class Leaf(Middle):
            def forward(self, x):
                return x
        class Middle(Base):
            pass
        class Base(nn.Module):
            pass
        class NotAModule(object):
            pass
        """)
    )
    assert [m.name for m in scan.modules] == ["Leaf", "Middle", "Base"]


# --------------------------------------------------------------------------------------------
# inputs convention


def test_plain_inputs_apply_to_sole_module_with_any_name():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        class Norm(nn.Module):
            pass
        def get_inputs():
            return []
        """)
    )
    norm = scan.module("Norm")
    assert (norm.inputs_fn, norm.init_inputs_fn) == ("get_inputs", None)


def test_plain_inputs_apply_only_to_model_when_several():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        class Helper(nn.Module):
            pass
        class Model(nn.Module):
            pass
        def get_inputs():
            return []
        def get_init_inputs():
            return []
        """)
    )
    assert scan.module("Model").inputs_fn == "get_inputs"
    helper = scan.module("Helper")
    assert not helper.has_inputs
    message = helper.missing_inputs_message()
    assert "get_inputs_Helper" in message and "get_init_inputs_Helper" in message


def test_named_inputs_win_over_plain_names():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        class Model(nn.Module):
            pass
        class Foo(nn.Module):
            pass
        def get_inputs(): return []
        def get_init_inputs(): return []
        def get_inputs_Model(): return []
        def get_inputs_Foo(): return []
        def get_init_inputs_Foo(): return []
        """)
    )
    assert (scan.module("Model").inputs_fn, scan.module("Model").init_inputs_fn) == (
        "get_inputs_Model",
        None,
    )
    assert (scan.module("Foo").inputs_fn, scan.module("Foo").init_inputs_fn) == (
        "get_inputs_Foo",
        "get_init_inputs_Foo",
    )


def test_candidate_class_is_not_a_problem_and_does_not_break_sole_module_rule():
    scan = scan_source(
        _src("""
        import torch.nn as nn
        class Norm(nn.Module):
            pass
        class ModelNew(nn.Module):
            pass
        def get_inputs(): return []
        """)
    )
    assert [m.name for m in scan.modules] == ["Norm", "ModelNew"]
    assert [m.name for m in scan.problems()] == ["Norm"]
    assert scan.module("Norm").inputs_fn == "get_inputs"


# --------------------------------------------------------------------------------------------
# resolve_module and split_target


def test_resolve_picks_model_then_sole_module(tmp_path):
    path = _write(tmp_path, KERNELBENCH)
    assert resolve_module(path, None).name == "Model"
    sole = _write(tmp_path, "import torch.nn as nn\nclass Only(nn.Module):\n    pass\n", "s.py")
    assert resolve_module(sole, None).name == "Only"


def test_resolve_named_module(tmp_path):
    path = _write(
        tmp_path,
        "import torch.nn as nn\nclass A(nn.Module):\n    pass\nclass B(nn.Module):\n    pass\n",
    )
    assert resolve_module(path, "B").name == "B"


def test_resolve_errors(tmp_path):
    empty = _write(tmp_path, "import torch\nx = 1\n", "empty.py")
    with pytest.raises(ProblemError, match="no torch.nn.Module subclass"):
        resolve_module(empty, None)

    two = _write(
        tmp_path,
        "import torch.nn as nn\nclass A(nn.Module):\n    pass\nclass B(nn.Module):\n    pass\n",
        "two.py",
    )
    with pytest.raises(ProblemError, match=r"several modules \(A, B\).*::NAME"):
        resolve_module(two, None)
    with pytest.raises(ProblemError, match=r"no nn.Module class 'C' \(found: A, B\)"):
        resolve_module(two, "C")

    broken = _write(tmp_path, "import torch\n\nclass Model(:\n", "broken.py")
    with pytest.raises(ProblemError, match=r"broken.py:3: syntax error"):
        resolve_module(broken, None)

    with pytest.raises(ProblemError, match="cannot read"):
        resolve_module(tmp_path / "missing.py", None)


@pytest.mark.parametrize(
    "target, expected",
    [
        ("examples/mlp.py", (Path("examples/mlp.py"), None)),
        ("examples/mlp.py::Model", (Path("examples/mlp.py"), "Model")),
        ("a/b.py::", (Path("a/b.py"), None)),
        ("/abs/x.py::GatedMLP", (Path("/abs/x.py"), "GatedMLP")),
    ],
)
def test_split_target(target, expected):
    assert split_target(target) == expected


# --------------------------------------------------------------------------------------------
# load_problem (executes the file)


def test_load_good_problem(tmp_path):
    import torch

    problem = load_problem(_write(tmp_path, KERNELBENCH))
    assert problem.info.name == "Model"
    model = problem.build()
    assert model.scale == 3.0
    inputs = problem.inputs()
    assert len(inputs) == 1
    torch.testing.assert_close(model(*inputs), torch.full((2, 3), 3.0))


def test_load_named_problem_without_init_inputs(tmp_path):
    path = _write(
        tmp_path,
        """
        import torch.nn as nn
        class A(nn.Module):
            def forward(self, x):
                return x + 1
        class B(nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs_B():
            return (5,)
        """,
    )
    problem = load_problem(path, "B")
    assert problem.module_class.__name__ == "B"
    model = problem.build()  # no get_init_inputs_B: constructed without arguments
    assert problem.inputs() == [5]  # tuples are accepted and turned into a list
    assert model(*problem.inputs()) == 10
    with pytest.raises(ProblemError, match="get_inputs_A"):
        load_problem(path, "A")


def test_two_loads_are_independent_modules(tmp_path):
    path = _write(tmp_path, KERNELBENCH)
    first, second = load_problem(path), load_problem(path)
    assert first.namespace is not second.namespace
    first.namespace.get_init_inputs = lambda: [7.0]
    assert second.build().scale == 3.0


def test_init_raising_is_reported_by_build(tmp_path):
    path = _write(
        tmp_path,
        """
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                raise ValueError(f"bad size {n}")
        def get_inputs():
            return []
        def get_init_inputs():
            return [42]
        """,
    )
    problem = load_problem(path)  # loading does not construct the module
    with pytest.raises(
        ProblemError, match=r"Model\(\*get_init_inputs\(\)\) raised ValueError: bad size 42"
    ):
        problem.build()


def test_get_inputs_raising_and_wrong_type(tmp_path):
    path = _write(
        tmp_path,
        """
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return x
        def get_inputs():
            raise RuntimeError("no data")
        """,
    )
    problem = load_problem(path)
    problem.build()
    with pytest.raises(ProblemError, match=r"get_inputs\(\) raised RuntimeError: no data"):
        problem.inputs()

    problem.get_inputs = lambda: 3
    with pytest.raises(ProblemError, match="must return a list"):
        problem.inputs()


def test_import_error_at_module_level(tmp_path):
    path = _write(
        tmp_path,
        """
        import torch.nn as nn
        import kernelstitch_no_such_package
        class Model(nn.Module):
            pass
        def get_inputs():
            return []
        """,
    )
    before = set(sys.modules)
    with pytest.raises(ProblemError, match=r"importing .*problem.py raised ModuleNotFoundError"):
        load_problem(path)
    # The half-executed module must not linger in sys.modules.
    assert not {m for m in set(sys.modules) - before if m.endswith("_problem")}


def test_missing_inputs_refused_before_executing(tmp_path):
    marker = tmp_path / "executed"
    path = _write(
        tmp_path,
        f"""
        import pathlib
        import torch.nn as nn
        pathlib.Path({str(marker)!r}).write_text("yes")
        class Net(nn.Module):
            pass
        """,
    )
    with pytest.raises(ProblemError, match="get_inputs_Net"):
        load_problem(path)
    assert not marker.exists()


def test_file_not_found(tmp_path):
    with pytest.raises(ProblemError, match="cannot read .*nope.py"):
        load_problem(tmp_path / "nope.py")


def test_import_file_syntax_error_names_line_and_cleans_up(tmp_path):
    from kernelstitch.core.problem import import_file

    path = _write(tmp_path, "x = 1\ny = (\n", "bad_syntax.py")
    before = set(sys.modules)
    with pytest.raises(ProblemError, match=r"bad_syntax.py:2: syntax error"):
        import_file(path)
    assert not {m for m in set(sys.modules) - before if m.endswith("_bad_syntax")}
