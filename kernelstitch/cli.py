"""`kernelstitch` command line: everything the editor does, from a terminal.

Each command imports its machinery lazily so `kernelstitch --help` (and the language server,
which shares this package) start fast.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Turn PyTorch modules into verified, fused CUDA.",
)

# Exit status 2 (the README's table): click's own usage errors (an unknown option or command, a
# missing argument, a value of the wrong type) exit 2 by themselves; so do the checks below of
# what click cannot see (a FILE.py that does not exist, a folder that is not one).
EXIT_USAGE = 2


def _one_of(value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
    return value


PRECISION_HELP = ("fp32 (default: checked in strict fp32, timed under PyTorch's default settings), "
                  "strict (fp32, timed with TF32 off: your code turns it off), or an opt-in: "
                  "tf32, bf16, fp16 for GEMMs and convolutions; the Verifier compares against "
                  "float64 with that precision's tolerance and times eager / torch.compile with it "
                  "allowed")


def _precision(value: str) -> str:
    from kernelstitch.core.precision import PrecisionError, precision_mode

    try:
        return precision_mode(value).name
    except PrecisionError as exc:
        raise typer.BadParameter(str(exc)) from None


def _no_such_file(target: str, *, json_stdout: bool = False) -> None:
    """Exit 2 when FILE.py of `target` (FILE.py or FILE.py::Module) does not exist; with --json
    the error is also the one JSON object on stdout (`{"error", "exit_status"}`, as profile's)."""
    import json

    from kernelstitch.core.problem import split_target

    source, _ = split_target(target)
    if source.exists():
        return
    if json_stdout:
        print(json.dumps({"error": f"no such file: {source}", "exit_status": EXIT_USAGE}))
    typer.echo(f"no such file: {source}", err=True)
    raise typer.Exit(EXIT_USAGE)


@app.command()
def generate(
    target: str = typer.Argument(..., help="FILE.py or FILE.py::Module"),
    coder: str = typer.Option("builtin", callback=lambda v: _one_of(v, ("builtin", "llm")),
                              help="builtin (default, offline) or llm"),
    llm: bool = typer.Option(False, "--llm", help="use the LLM Planner and Coder (= --coder llm)"),
    llm_base_url: str | None = typer.Option(
        None, envvar="KERNELSTITCH_LLM_BASE_URL",
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (default: OpenAI)"),
    llm_model: str | None = typer.Option(None, envvar="KERNELSTITCH_LLM_MODEL",
                                            help="model name served by the endpoint"),
    llm_api_key_env: str | None = typer.Option(
        None, help="NAME of the environment variable holding the API key (default "
                   "OPENAI_API_KEY; '' for endpoints that need none)"),
    llm_timeout: float | None = typer.Option(None, help="seconds per LLM request"),
    max_iterations: int | None = typer.Option(None, help="LLM Coder replies (default 4)"),
    time_budget: float | None = typer.Option(None, help="seconds for the LLM path (default 600)"),
    token_budget: int | None = typer.Option(None, help="tokens for the LLM path (default: no limit)"),
    llm_planner: bool = typer.Option(True, help="let the LLM plan (else: the built-in plan)"),
    verify: bool = typer.Option(True, help="verify the candidate (needs a CUDA GPU)"),
    search: bool = typer.Option(
        True, "--search/--no-search",
        help="time variants against your module; deliver the fastest verified one or keep yours"),
    variants: int = typer.Option(4, help="--search: how many plan variants to build and time"),
    search_time: float = typer.Option(
        180.0, help="--search: seconds after which no further contender is verified (a second, "
                    "profile-driven round starts only in the first 40% of them)"),
    profile: bool = typer.Option(False, help="profile the accepted candidate"),
    precision: str = typer.Option("fp32", callback=_precision, help=PRECISION_HELP),
    json_output: bool = typer.Option(False, "--json", help="print the job result as JSON"),
    workspace: Path | None = typer.Option(None, help="workspace root (default: found from FILE)"),
) -> None:
    """Plan, code, verify: writes .kernelstitch/<file>/<Module>/model_new.py and a report."""
    _no_such_file(target, json_stdout=json_output)
    from kernelstitch.agents.pipeline_cli import generate_command, llm_settings

    settings, budget = llm_settings(
        base_url=llm_base_url, model=llm_model, api_key_env=llm_api_key_env,
        timeout_s=llm_timeout, planner=llm_planner, iterations=max_iterations,
        time_s=time_budget, tokens=token_budget)
    raise typer.Exit(
        generate_command(
            target, coder="llm" if llm else coder, verify=verify, profile=profile,
            json_output=json_output, workspace=workspace, llm=settings, budget=budget,
            search=search, variants=variants, search_time_s=search_time, precision=precision,
        )
    )


@app.command("verify")
def verify_cmd(
    reference: Path = typer.Argument(..., help="reference problem file (defines Model)"),
    candidate: Path = typer.Argument(..., help="candidate file (defines ModelNew)"),
    module: str | None = typer.Option(None, help="reference class (default: Model)"),
    json_output: bool = typer.Option(False, "--json", help="print one JSON object"),
    seeds: int = typer.Option(3, help="random seeds per shape"),
    timing: bool = typer.Option(True, help="time candidate vs eager and torch.compile"),
    precision: str = typer.Option("fp32", callback=_precision, help=PRECISION_HELP),
) -> None:
    """Check a candidate: exit 0 accepted, 1 rejected, 2 could not verify."""
    from kernelstitch.agents.verifier.cli import verify_command

    raise typer.Exit(
        verify_command(
            reference, candidate, json_output=json_output, module=module, seeds=seeds,
            timing=timing, precision=precision,
        )
    )


@app.command("profile")
def profile_cmd(
    target: str = typer.Argument(..., help="FILE.py or FILE.py::Module"),
    json_output: bool = typer.Option(False, "--json", help="print one JSON object (the report)"),
    json_out: Path | None = typer.Option(None, "--json-out", help="write the report as JSON here"),
    backend: list[str] = typer.Option(["torch", "ncu"], help="torch, ncu, nsys"),
    plot: Path | None = typer.Option(None, help="write a roofline PNG here"),
    candidate: bool = typer.Option(False, help="profile ModelNew instead of the module"),
) -> None:
    """Kernel table and findings tied to source lines (needs a CUDA GPU)."""
    _no_such_file(target, json_stdout=json_output)
    from kernelstitch.profiler.cli import profile_command

    raise typer.Exit(
        profile_command(target, json_out=json_out, json_stdout=json_output, backends=backend, plot=plot,
                        candidate=candidate)
    )


@app.command()
def bench(
    directory: Path = typer.Argument(
        ..., help="folder of KernelBench-format problems: *.py files, or level1/ level2/ ..."),
    levels: list[str] = typer.Option(
        [], "--levels", help="only these levels: --levels 1 2 (or 1,2)"),
    only: list[str] = typer.Option(
        [], help="only these problems, file stem or level1/stem: a,b or --only a --only b; run in that order"),
    coder: str = typer.Option("builtin", help="builtin (offline) or llm"),
    jobs: int = typer.Option(1, help="GPUs to measure on at once, one problem per GPU"),
    build_jobs: int | None = typer.Option(
        None, help="problems preparing (capture, codegen, nvcc) at once; default min(8, CPUs)"),
    time_limit: float = typer.Option(
        900.0, "--time-limit", metavar="SECONDS",
        help="per problem (prepare + measure); over it the problem is cancelled: 'timeout'"),
    profile: bool = typer.Option(False, help="profile the reference: roofline fraction"),
    seeds: int = typer.Option(3, help="random seeds per shape in verification"),
    timing_budget: float = typer.Option(
        1.0, "--timing-budget", metavar="SECONDS",
        help="timed runs per implementation (eager, torch.compile, ours), at least 15-30 runs"),
    rerun: bool = typer.Option(False, help="run problems again that the run store has results for"),
    precision: str = typer.Option("fp32", callback=_precision, help=PRECISION_HELP),
    search: bool = typer.Option(
        True, "--search/--no-search",
        help="measure variants against the original and keep it when nothing beats it"),
    resume_from: list[Path] = typer.Option(
        [], "--resume-from", metavar="RESULTS_JSON",
        help="also reuse the results of an earlier run's results.json (same keys as the store)"),
    ray: str | None = typer.Option(
        None, metavar="ADDRESS", help="run problems as Ray tasks (num_gpus=1) on this cluster"),
    llm_base_url: str | None = typer.Option(
        None, envvar="KERNELSTITCH_LLM_BASE_URL", help="--coder llm: OpenAI-compatible endpoint"),
    llm_model: str | None = typer.Option(
        None, envvar="KERNELSTITCH_LLM_MODEL", help="--coder llm: model name"),
    llm_api_key_env: str | None = typer.Option(
        None, help="--coder llm: NAME of the variable holding the API key"),
    max_iterations: int | None = typer.Option(None, help="--coder llm: Coder replies"),
    time_budget: float | None = typer.Option(None, help="--coder llm: seconds per problem"),
    token_budget: int | None = typer.Option(None, help="--coder llm: tokens per problem"),
    out: Path | None = typer.Option(None, help="results folder (default bench/results/DATE)"),
    workspace: Path | None = typer.Option(
        None, help="workspace root: run store and outputs (default: found from DIRECTORY)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print every pipeline stage"),
) -> None:
    """Generate + verify (+ profile) every problem of a folder: JSON, markdown table and plots.

    Resumable: problems finished earlier with the same file, coder, settings, GPU model and
    compiler sources are taken from the run store or from an earlier results.json given with
    --resume-from (--rerun runs them again).

    Exit status: 0 all problems accepted; 1 the run completed but some problem was not
    accepted (rejected, could not verify, failed, timeout); 2 it could not start; 130
    interrupted (finished problems are saved and reported).
    """
    import shlex
    import sys

    from kernelstitch.bench.cli import bench_command

    argv0 = "kernelstitch" if sys.argv[0].endswith(("kernelstitch", "__main__.py")) else sys.argv[0]
    command = shlex.join([argv0, *sys.argv[1:]]) if "bench" in sys.argv[1:] else None
    raise typer.Exit(bench_command(
        directory, out, only or None, levels=[v for item in levels for v in item.split(",")
                                              if v.strip()] or None,
        coder=coder, jobs=jobs, build_jobs=build_jobs, time_limit_s=time_limit, profile=profile,
        seeds=seeds, timing_budget_s=timing_budget, rerun=rerun, ray=ray, workspace=workspace, verbose=verbose, command=command,
        resume_from=resume_from or None, search=search, precision=precision,
        llm={k: v for k, v in (("base_url", llm_base_url), ("model", llm_model),
                               ("api_key_env", llm_api_key_env)) if v is not None},
        budget={k: v for k, v in (("iterations", max_iterations), ("time_s", time_budget),
                                  ("tokens", token_budget)) if v is not None},
    ))


@app.command("bench-merge")
def bench_merge(
    results: list[Path] = typer.Argument(..., help="results.json files of earlier bench runs"),
    out: Path = typer.Option(..., help="folder for the merged results.json, results.md, plots"),
    finished_over_timeouts: bool = typer.Option(
        False, "--finished-over-timeouts",
        help="a later timeout leaves an earlier measured result standing (named in the notes)"),
) -> None:
    """One report over bench runs made in several calls or samples (nothing is re-measured;
    a later file wins for a problem in several, but never a later cancellation)."""
    from kernelstitch.bench.merge import merge_results

    try:
        summary, sources = merge_results(results, out, finished_over_timeouts)
    except (OSError, ValueError) as exc:
        typer.echo(f"bench-merge: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"merged {sum(s.problems for s in sources)} results from {len(sources)} runs into "
               f"{out / 'results.md'}: {summary.get('problems')} problems, geomean vs eager "
               f"{summary.get('geomean_speedup_vs_eager')}, vs torch.compile "
               f"{summary.get('geomean_speedup_vs_compiled')}")


@app.command("bench-coverage")
def bench_coverage(
    directory: Path = typer.Argument(..., help="bench folder (*.py files or level1/, level2/...)"),
    levels: list[str] | None = typer.Option(
        None, "--levels", help="levels to include: --levels 1,2 or --levels 1 --levels 2"),
    only: list[str] | None = typer.Option(None, "--only", help="problem names (a,b or repeated)"),
    out: Path | None = typer.Option(None, "--out", help="JSON report with per-problem detail"),
    markdown: Path | None = typer.Option(None, "--markdown", help="markdown tables"),
    jobs: int = typer.Option(2, "--jobs", min=1, help="captures at a time (one worker each)"),
    timeout: float = typer.Option(120.0, "--timeout", help="seconds per capture"),
) -> None:
    """Which ops the built-in planner leaves to PyTorch: capture (in a worker) and plan every
    problem, count pytorch_fallback / library_call steps per level (nothing is compiled)."""
    from kernelstitch.bench.coverage import (
        ALL,
        render_markdown,
        report_json,
        run_coverage,
        write_outputs,
    )
    from kernelstitch.bench.problems import BenchError

    def progress(done: int, total: int, result) -> None:
        what = result.status if not result.error else f"{result.status}: {result.error['cause']}"
        typer.echo(f"[{done}/{total}] {result.name}: {what} ({result.seconds:.1f}s)", err=True)

    # --levels 1 2 3 and --levels 1,2,3 both work
    wanted = [p for item in levels or [] for p in re.split(r"[,\s]+", item) if p]
    try:
        results = run_coverage(directory, wanted or None, jobs=jobs, timeout_s=timeout,
                               only=only, progress=progress)
    except BenchError as exc:
        typer.echo(f"bench-coverage: {exc}", err=True)
        raise typer.Exit(2) from exc
    report = report_json(results, directory, levels=wanted or None, timeout_s=timeout)
    try:
        write_outputs(report, out, markdown)
    except OSError as exc:
        typer.echo(f"bench-coverage: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(render_markdown(report["summary"]))
    total = report["summary"][ALL] if ALL in report["summary"] else \
        next(iter(report["summary"].values()))
    typer.echo(f"{total['planned']}/{total['problems']} planned, {total['with_fallback']} keep "
               f"a pytorch_fallback step, {total['capture_failed']} capture failures"
               + (f"; JSON: {out}" if out else "") + (f"; markdown: {markdown}" if markdown else ""))


@app.command()
def watch(
    directory: Path = typer.Argument(Path("."), help="folder to watch"),
) -> None:
    """Re-verify generated implementations when they or their sources change."""
    if not directory.is_dir():
        typer.echo(f"watch: not a folder: {directory}", err=True)
        raise typer.Exit(EXIT_USAGE)
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


_LEVEL_VALUE = re.compile(r"^(?:level[_-]?)?\d+$", re.IGNORECASE)


def expand_levels(argv: list[str]) -> list[str]:
    """`bench DIR --levels 1 2` -> `--levels 1 --levels 2` (click options take one value)."""
    if "bench" not in argv:
        return argv
    result: list[str] = []
    taking = False
    for arg in argv:
        if taking and _LEVEL_VALUE.match(arg) and not Path(arg).exists():
            result += ["--levels", arg]
            continue
        taking = arg == "--levels"
        result.append(arg)
    return [a for i, a in enumerate(result)
            if not (a == "--levels" and i + 1 < len(result) and result[i + 1] == "--levels")]


def main() -> None:
    import sys

    app(args=expand_levels(sys.argv[1:]))


if __name__ == "__main__":
    main()
