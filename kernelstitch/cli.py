"""`kernelstitch` command line: everything the editor does, from a terminal.

Each command imports its machinery lazily so `kernelstitch --help` (and the language server,
which shares this package) start fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Turn PyTorch modules into verified, fused CUDA.",
)


@app.command()
def generate(
    target: str = typer.Argument(..., help="FILE.py or FILE.py::Module"),
    coder: str = typer.Option("builtin", help="builtin (default, offline) or llm"),
    verify: bool = typer.Option(True, help="verify the candidate (needs a CUDA GPU)"),
    profile: bool = typer.Option(False, help="profile the accepted candidate"),
    json_output: bool = typer.Option(False, "--json", help="print the job result as JSON"),
    workspace: Optional[Path] = typer.Option(None, help="workspace root (default: found from FILE)"),
) -> None:
    """Plan, code, verify: writes .kernelstitch/<file>/<Module>/model_new.py and a report."""
    from kernelstitch.agents.pipeline_cli import generate_command

    raise typer.Exit(
        generate_command(
            target, coder=coder, verify=verify, profile=profile, json_output=json_output,
            workspace=workspace,
        )
    )


@app.command("verify")
def verify_cmd(
    reference: Path = typer.Argument(..., help="reference problem file (defines Model)"),
    candidate: Path = typer.Argument(..., help="candidate file (defines ModelNew)"),
    module: Optional[str] = typer.Option(None, help="reference class (default: Model)"),
    json_output: bool = typer.Option(False, "--json", help="print one JSON object"),
    seeds: int = typer.Option(3, help="random seeds per shape"),
    timing: bool = typer.Option(True, help="time candidate vs eager and torch.compile"),
) -> None:
    """Check a candidate: exit 0 accepted, 1 rejected, 2 could not verify."""
    from kernelstitch.agents.verifier.cli import verify_command

    raise typer.Exit(
        verify_command(
            reference, candidate, json_output=json_output, module=module, seeds=seeds,
            timing=timing,
        )
    )


@app.command("profile")
def profile_cmd(
    target: str = typer.Argument(..., help="FILE.py or FILE.py::Module"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="write the profile as JSON"),
    backend: List[str] = typer.Option(["torch", "ncu"], help="torch, ncu, nsys"),
    plot: Optional[Path] = typer.Option(None, help="write a roofline PNG here"),
    candidate: bool = typer.Option(False, help="profile ModelNew instead of the module"),
) -> None:
    """Kernel table and findings tied to source lines (needs a CUDA GPU)."""
    from kernelstitch.profiler.cli import profile_command

    raise typer.Exit(
        profile_command(target, json_out=json_out, backends=backend, plot=plot, candidate=candidate)
    )


@app.command()
def bench(
    directory: Path = typer.Argument(..., help="folder of KernelBench-format problems"),
    out: Optional[Path] = typer.Option(None, help="results folder (default bench/results/DATE)"),
    only: List[str] = typer.Option([], help="problem names (file stems) to run"),
) -> None:
    """Generate + verify every problem in a folder; JSON + markdown table of the results."""
    from kernelstitch.agents.bench import bench_command

    raise typer.Exit(bench_command(directory, out, only or None))


@app.command()
def watch(
    directory: Path = typer.Argument(Path("."), help="folder to watch"),
) -> None:
    """Re-verify generated implementations when they or their sources change."""
    from kernelstitch.watch_cli import watch_command

    raise typer.Exit(watch_command(directory))


@app.command()
def serve(
    tcp: bool = typer.Option(False, help="listen on TCP instead of stdio"),
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(2087),
) -> None:
    """Start the language server (stdio by default)."""
    from kernelstitch.server import main as server_main

    argv = ["--tcp", "--host", host, "--port", str(port)] if tcp else []
    raise typer.Exit(server_main(argv) or 0)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
