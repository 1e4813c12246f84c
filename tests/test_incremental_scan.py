"""core/incremental_scan.py: the per-run cached scan equals scan_source, and an edit re-parses
only the run it touched (issue 25's typing latency)."""

from __future__ import annotations

import random
from pathlib import Path

from kernelstitch.core.incremental_scan import IncrementalScanner, split_runs
from kernelstitch.core.problem import scan_source

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "examples").glob("*.py"))
EDITS = ["x", " ", "(", ")", ":", "#c", '"""', "'", "\n    y = (", "\nclass Z(nn.Module):", "\n@dec", "\\",
         "\ndef get_inputs():\n    return []", "\n    def forward(self, x):\n        return x"]


def test_equal_to_the_full_scan_on_every_example_and_random_edits():
    scanner = IncrementalScanner()
    for path in FILES:
        text = path.read_text()
        assert scanner.scan(text) == scan_source(text), path.name
    rng = random.Random(5)
    lines = "\n\n".join(p.read_text() for p in FILES).split("\n")
    for _ in range(300):
        i = rng.randrange(len(lines))
        if rng.random() < 0.7:
            lines[i] += rng.choice(EDITS)
        else:  # undo-like: drop a line, so broken text heals as well as breaks
            del lines[i]
        text = "\n".join(lines)
        assert scanner.scan(text) == scan_source(text)


def test_an_edit_inside_a_method_reparses_one_run():
    text = "\n\n".join(p.read_text() for p in FILES)
    scanner = IncrementalScanner()
    scanner.scan(text)
    lines = text.split("\n")
    line = next(i for i, s in enumerate(lines) if s.startswith("        return"))
    before = scanner.parsed_runs
    lines[line] += "  # edited"
    assert scanner.scan("\n".join(lines)) == scan_source("\n".join(lines))
    assert scanner.parsed_runs == before + 1
    assert len(split_runs(lines)) > 20


def test_a_decorated_definition_stays_in_one_run():
    lines = ["import torch", "@torch.no_grad()", "def f():", "    pass", "class M(torch.nn.Module):", "    pass"]
    assert split_runs(lines) == [(0, 1), (1, 4), (4, 6)]
