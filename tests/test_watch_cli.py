"""`kernelstitch watch`: which (source, module) a changed file affects, and change reporting."""

import json

from kernelstitch.core.workspace import Workspace
from kernelstitch.watch_cli import VerdictBoard, targets_for_change

SOURCE = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 2
class Other(nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.randn(4)]
"""


def test_source_change_targets_only_modules_with_generated_code(tmp_path):
    (tmp_path / ".git").mkdir()
    source = tmp_path / "m.py"
    source.write_text(SOURCE)
    ws = Workspace(tmp_path)
    assert targets_for_change(source, ws) == []
    out = ws.output_dir(source, "Model")
    (out / "model_new.py").write_text("# generated")
    assert targets_for_change(source, ws) == [(source, "Model")]


def test_generated_file_change_targets_its_source_from_plan(tmp_path):
    ws = Workspace(tmp_path)
    source = tmp_path / "m.py"
    source.write_text(SOURCE)
    out = ws.output_dir(source, "Model")
    (out / "plan.json").write_text(json.dumps({"source_path": str(source), "module": "Model"}))
    candidate = out / "model_new.py"
    candidate.write_text("# generated")
    assert targets_for_change(candidate, ws) == [(source, "Model")]
    (out / "plan.json").write_text("{broken")
    assert targets_for_change(candidate, ws) == []


def test_board_reports_changes_only():
    board = VerdictBoard()
    assert board.update("a.py", "Model", "accepted") == "a.py::Model: new -> accepted"
    assert board.update("a.py", "Model", "accepted") is None
    assert "accepted -> rejected" in board.update("a.py", "Model", "rejected (wrong_output)")


def test_a_source_that_does_not_parse_is_named_with_its_line(tmp_path):
    from kernelstitch.watch_cli import parse_problem

    source = tmp_path / "m.py"
    source.write_text(SOURCE + "def broken(:\n")
    message = parse_problem(source)
    assert message.startswith("m.py:11: syntax error") and "not verified until it parses" in message
    source.write_text(SOURCE)
    assert parse_problem(source) is None
