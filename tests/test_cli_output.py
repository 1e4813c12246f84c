"""Issue 27: what the CLI prints is what it means: code in messages survives rich's markup, and
off a terminal nothing is wrapped at 80 columns."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from kernelstitch.core.terminal import plain

MODULE = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return x * 2
""")


def test_the_missing_inputs_hint_shows_its_code_and_long_paths_stay_on_one_line(tmp_path):
    folder = tmp_path / ("a_directory_name_long_enough_to_push_the_path_past_eighty_columns_" * 2)
    folder.mkdir()
    path = folder / "mod.py"
    path.write_text(MODULE)
    done = subprocess.run([sys.executable, "-m", "kernelstitch", "generate", str(path), "--no-verify"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert "`def get_inputs(): return [torch.randn(...)]`" in done.stderr  # markup used to eat it
    lines = [line for line in done.stderr.splitlines() if "has no example inputs" in line]
    assert len(lines) == 1 and lines[0].rstrip().endswith("at module level.")  # one unwrapped line


def test_plain_escapes_markup():
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(f"[red]x[/red] {plain('[torch.randn(2)] [bold]not bold[/bold]')}")
    assert "[torch.randn(2)] [bold]not bold[/bold]" in console.export_text()


def test_profile_json_is_one_object_on_stdout_like_generate_and_verify(tmp_path):
    import json

    import torch

    if torch.cuda.is_available():
        return  # the no-GPU answer is what this checks
    path = tmp_path / "mod.py"
    path.write_text(MODULE + "\ndef get_inputs():\n    return [torch.randn(4)]\n")
    done = subprocess.run([sys.executable, "-m", "kernelstitch", "profile", str(path), "--json"],
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 2
    answer = json.loads(done.stdout)  # exactly one object: json.loads fails on anything more
    assert answer["exit_status"] == 2 and "no GPU" in answer["error"]
