"""Exit status 2 for usage errors (the README's table, issue 27): click's own (an unknown option
or command, a missing argument, a value of the wrong type) and the CLI's (a FILE.py that does
not exist, a folder that is not one, an unknown --coder), for every command.  In process through
typer's runner (nothing here imports torch), and once through the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kernelstitch.cli import app

COMMANDS = ["generate", "verify", "profile", "bench", "bench-merge", "bench-coverage", "watch", "serve"]
MISSING_ARGUMENT = ["generate", "verify", "profile", "bench", "bench-merge", "bench-coverage"]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_option_exits_2(command):
    result = run(command, "--no-such-option", "x")
    assert result.exit_code == 2, result.output
    assert "No such option: --no-such-option" in result.output


@pytest.mark.parametrize("command", MISSING_ARGUMENT)
def test_a_missing_argument_exits_2(command):
    result = run(command)
    assert result.exit_code == 2, result.output
    assert "Missing argument" in result.output


def test_an_unknown_command_and_a_value_of_the_wrong_type_exit_2(tmp_path):
    unknown = run("no-such-command")
    assert unknown.exit_code == 2 and "No such command 'no-such-command'" in unknown.output
    wrong_type = run("generate", "--variants", "many", str(tmp_path / "m.py"))
    assert wrong_type.exit_code == 2 and "Invalid value for '--variants'" in wrong_type.output
    coder = run("generate", "--coder", "gpt", str(tmp_path / "m.py"))
    assert coder.exit_code == 2 and "Invalid value for '--coder'" in coder.output


def test_a_file_or_folder_that_does_not_exist_exits_2(tmp_path):
    missing = tmp_path / "missing.py"
    for args in (["generate", str(missing)], ["generate", f"{missing}::Model"], ["profile", str(missing)],
                 ["verify", str(missing), str(missing)]):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert f"no such file: {missing}" in result.output
    watch = run("watch", str(tmp_path / "no-folder"))
    assert watch.exit_code == 2 and "not a folder" in watch.output


@pytest.mark.parametrize("command", ["generate", "profile"])
def test_json_reports_a_missing_file_as_its_one_json_object(command, tmp_path):
    missing = tmp_path / "missing.py"
    result = CliRunner().invoke(app, [command, str(missing), "--json"])
    assert result.exit_code == 2
    (line,) = result.stdout.splitlines()
    assert json.loads(line) == {"error": f"no such file: {missing}", "exit_status": 2}


def test_the_installed_entry_point_exits_2_on_usage_errors(tmp_path):
    """`python -m kernelstitch` (main(), expand_levels included), not only the typer app."""
    for args in (["generate", "--no-such-option"], ["verify", "only-one.py"], ["bench", "--levels"]):
        done = subprocess.run([sys.executable, "-m", "kernelstitch", *args], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path, check=False)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == "" and ("Usage: " in done.stderr or "requires an argument" in done.stderr)
