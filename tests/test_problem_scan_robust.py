"""scan_source never raises (issue 25): text Python's parser refuses is a parse error or, for a
lone UTF-16 surrogate, scanned with U+FFFD in its place (lines and columns unchanged)."""

from __future__ import annotations

from kernelstitch.core.problem import scan_source

MODULE = "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_a_lone_surrogate_is_scanned_as_a_replacement_character():
    scan = scan_source("name = '\ud800'\n" + MODULE)
    assert scan.error is None and [(m.name, m.line) for m in scan.modules] == [("M", 3)]


def test_nesting_past_the_parser_is_a_parse_error():
    for text in ("x = " + "-" * 100_000 + "1\n", "x = " + "(" * 5000 + ")" * 5000 + "\n",
                 "x = " + "[" * 1000 + "]" * 1000 + "\n"):
        scan = scan_source(text)
        assert scan.error is not None and scan.modules == ()
