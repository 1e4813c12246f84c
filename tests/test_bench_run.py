"""run_bench end to end with a fake runner: resume, levels, reports, plots, Ray, devices, CLI."""

import json
import struct
import sys
import threading

import pytest
from bench_fakes import Behaviour, FakeRunner, spec_for, write_problem
from typer.testing import CliRunner

from kernelstitch.bench import BenchError, BenchSettings, discover, resume, run_bench
from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import evaluate_problem
from kernelstitch.bench.plots import MISSING_NOTE
from kernelstitch.bench.problems import ProblemSpec
from kernelstitch.bench.ray_backend import run_on_ray
from kernelstitch.bench.settings import resolve_devices, resume_key
from kernelstitch.cli import app, expand_levels
from kernelstitch.core.runstore import RunStore

ENV = {"date": "2030-01-02T03:04:05+00:00", "device": "Fake GPU", "torch": "9.9",
       "cuda": "99.0", "host": "testhost", "devices": ["Fake GPU", "Fake GPU"]}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_dir(tmp_path, names=("1_a", "2_b", "10_c")):
    folder = tmp_path / "problems"
    for i, name in enumerate(names):
        write_problem(folder / f"{name}.py", scale=i + 1)
    return folder


def bench(tmp_path, folder, runner, out="out", **settings):
    settings.setdefault("build_jobs", 2)
    return run_bench(folder, tmp_path / out, BenchSettings(**settings), runner=runner,
                     devices=[0, 1], env=ENV, workspace_root=tmp_path,
                     command="kernelstitch bench X")


# ---------------------------------------------------------------------------------------------
# resume


def test_rerun_skips_finished_problems_and_reuses_their_outcomes(tmp_path):
    folder = make_dir(tmp_path)
    first = FakeRunner()
    run1 = bench(tmp_path, folder, first)
    assert len(first.prepares) == 3 and not any(o.reused for o in run1.outcomes)

    second = FakeRunner()
    run2 = bench(tmp_path, folder, second, out="out2")
    assert second.prepares == [] and second.measures == []
    assert all(o.reused for o in run2.outcomes)
    assert [(o.problem, o.status, o.speedup_vs_eager) for o in run2.outcomes] == \
        [(o.problem, o.status, o.speedup_vs_eager) for o in run1.outcomes]
    assert run2.summary["reused"] == 3
    assert "reused from the run store" in run2.files["markdown"].read_text()


def test_a_results_json_alone_resumes_a_run(tmp_path):
    """No run store travels: the committed results.json carries each problem's resume key."""
    folder = make_dir(tmp_path)
    first = run_bench(folder, tmp_path / "out1", BenchSettings(build_jobs=2), runner=FakeRunner(),
                      devices=[0], env=ENV, workspace_root=tmp_path / "machine1")
    results = first.files["json"]
    assert all(p["resume_key"] for p in json.loads(results.read_text())["problems"])
    runner = FakeRunner()
    again = run_bench(folder, tmp_path / "out2", BenchSettings(build_jobs=2), runner=runner,
                      devices=[0], env=ENV, workspace_root=tmp_path / "machine2",
                      resume_from=[results])
    assert runner.prepares == [] and all(o.reused for o in again.outcomes)
    assert [o.speedup_vs_eager for o in again.outcomes] == \
        [o.speedup_vs_eager for o in first.outcomes]
    # Other settings make other keys: nothing is reused.
    other = FakeRunner()
    run_bench(folder, tmp_path / "out3", BenchSettings(build_jobs=2, seeds=5), runner=other,
              devices=[0], env=ENV, workspace_root=tmp_path / "machine3", resume_from=[results])
    assert len(other.prepares) == 3
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(BenchError, match="not a bench results.json"):
        run_bench(folder, tmp_path / "out4", BenchSettings(), runner=FakeRunner(), devices=[0],
                  env=ENV, workspace_root=tmp_path / "machine4",
                  resume_from=[tmp_path / "bad.json"])


def test_rerun_flag_runs_everything_again(tmp_path):
    folder = make_dir(tmp_path)
    bench(tmp_path, folder, FakeRunner())
    again = FakeRunner()
    run = bench(tmp_path, folder, again, rerun=True)
    assert len(again.prepares) == 3 and not any(o.reused for o in run.outcomes)


def test_changed_problem_file_or_coder_setting_runs_again(tmp_path):
    folder = make_dir(tmp_path)
    bench(tmp_path, folder, FakeRunner())
    write_problem(folder / "2_b.py", scale=42.0)
    runner = FakeRunner()
    bench(tmp_path, folder, runner)
    assert [p.problem for p in runner.prepares] == ["2_b"]

    other_seeds = FakeRunner()
    bench(tmp_path, folder, other_seeds, seeds=5)
    assert len(other_seeds.prepares) == 3
    other_budget = FakeRunner()  # a different timing budget is a different measurement
    bench(tmp_path, folder, other_budget, seeds=5, timing_budget_s=0.5)
    assert len(other_budget.prepares) == 3


def test_timeouts_are_reused_only_under_the_same_or_shorter_limit(tmp_path):
    folder = make_dir(tmp_path, names=("1_slow",))
    hang = FakeRunner(default=Behaviour(hang_in="measure"))
    assert bench(tmp_path, folder, hang, time_limit_s=0.3).outcomes[0].status == "timeout"

    same = FakeRunner()
    reused = bench(tmp_path, folder, same, time_limit_s=0.3).outcomes[0]
    assert same.prepares == [] and reused.status == "timeout" and reused.reused

    longer = FakeRunner()
    retried = bench(tmp_path, folder, longer, time_limit_s=5.0).outcomes[0]
    assert len(longer.prepares) == 1 and retried.status == "accepted"


def test_cancelled_problems_are_not_stored(tmp_path):
    folder = make_dir(tmp_path, names=("1_a",))
    stop = threading.Event()
    stop.set()
    run = run_bench(folder, tmp_path / "out", BenchSettings(), runner=FakeRunner(), devices=[None],
                    env=ENV, workspace_root=tmp_path, stop=stop)
    assert run.outcomes[0].status == "cancelled" and run.interrupted
    later = FakeRunner()
    bench(tmp_path, folder, later)
    assert len(later.prepares) == 1


def test_runstore_finds_runs_by_a_config_field(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    for key, text in (("k1", "one"), ("k2", "two"), ("k1", "newer")):
        run_id = store.start_run("bench", "/x.py", None, {"bench_key": key})
        store.add_artifact(run_id, "report", "o.json", {"text": text})
        store.finish_run(run_id, "succeeded")
    unfinished = store.start_run("bench", "/x.py", None, {"bench_key": "k3"})
    store.add_artifact(unfinished, "report", "o.json", {"text": "partial"})
    assert store.latest_by_config("bench", "bench_key", "k1", "report").content == {"text": "newer"}
    assert store.latest_by_config("bench", "bench_key", "k2", "report").content == {"text": "two"}
    assert store.latest_by_config("bench", "bench_key", "k3", "report") is None  # still running
    assert store.latest_by_config("bench", "bench_key", "k3", "report", status=None) is not None


def test_resume_key_covers_result_settings_not_scheduling(tmp_path):
    spec = spec_for(write_problem(tmp_path / "p.py"))
    base = resume_key(spec, BenchSettings(), "H100", "fp")
    assert base == resume_key(spec, BenchSettings(jobs=4, build_jobs=3, time_limit_s=5,
                                                  rerun=True), "H100", "fp")
    assert base != resume_key(spec, BenchSettings(coder="llm"), "H100", "fp")
    assert base != resume_key(spec, BenchSettings(profile=True), "H100", "fp")
    assert base != resume_key(spec, BenchSettings(), "A100", "fp")
    assert base != resume_key(spec, BenchSettings(), "H100", "other compiler")


def test_compiler_fingerprint_covers_prompts_and_plan_but_not_docs(tmp_path):
    from kernelstitch.bench.settings import compiler_fingerprint

    roots = {"agents": tmp_path / "agents", "bench": tmp_path / "bench"}
    files = ("agents/plan/model.py", "agents/pipeline.py", "agents/coder/builtin.py",
             "agents/coder/codegen/cuda/prelude.cuh", "agents/llm/coder_agent.py",
             "agents/llm/prompts/v1/coder_system.md", "agents/llm/README.md",
             "bench/report.py", "bench/runner.py")
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    base = compiler_fingerprint(roots)
    assert base == compiler_fingerprint(roots)
    for rel, changes in (("agents/llm/prompts/v1/coder_system.md", True),
                         ("agents/plan/model.py", True), ("agents/coder/builtin.py", True),
                         ("agents/coder/codegen/cuda/prelude.cuh", True),
                         ("agents/llm/README.md", False), ("bench/report.py", False),
                         ("bench/runner.py", True)):
        before = compiler_fingerprint(roots)
        (tmp_path / rel).write_text("# changed\n")
        assert (compiler_fingerprint(roots) != before) is changes, rel


# ---------------------------------------------------------------------------------------------
# problem discovery


def test_levels_layout_and_filters(tmp_path):
    root = tmp_path / "KernelBench"
    for rel in ("level1/2_b.py", "level1/10_c.py", "level1/_skip.py", "level2/1_x.py",
                "level3/5_y.py"):
        write_problem(root / rel)
    names = [s.name for s in discover(root)]
    assert names == ["level1/2_b", "level1/10_c", "level2/1_x", "level3/5_y"]  # natural order
    assert [s.name for s in discover(root, levels=["2"])] == ["level2/1_x"]
    assert [s.level for s in discover(root, levels=["1", "level3"])] == ["1", "1", "3"]
    assert [s.name for s in discover(root, only=["10_c", "level3/5_y"])] == \
        ["level1/10_c", "level3/5_y"]
    assert [s.name for s in discover(root, only=["10_c,level3/5_y"])] == \
        ["level1/10_c", "level3/5_y"]
    # in the order named (a time-limited call runs its priorities first), a name's first mention
    assert [s.name for s in discover(root, only=["level3/5_y,2_b", "level1/10_c", "2_b"])] == \
        ["level3/5_y", "level1/2_b", "level1/10_c"]
    with pytest.raises(BenchError, match="no problems for level"):
        discover(root, levels=["4"])
    with pytest.raises(BenchError, match="level numbers"):
        discover(root, levels=["hard"])
    level_dir = discover(root / "level1")
    assert [(s.name, s.level) for s in level_dir] == [("2_b", "1"), ("10_c", "1")]
    with pytest.raises(BenchError, match="not a folder"):
        discover(tmp_path / "missing")
    with pytest.raises(BenchError, match="no problems"):
        discover(root, only=["nope"])


def test_run_bench_runs_only_the_selected_levels(tmp_path):
    root = tmp_path / "kb"
    write_problem(root / "level1" / "1_a.py")
    write_problem(root / "level2" / "1_b.py", scale=3.0)
    runner = FakeRunner()
    run = run_bench(root, tmp_path / "out", BenchSettings(), levels=["2"], runner=runner,
                    devices=[None], env=ENV, workspace_root=tmp_path)
    assert [o.problem for o in run.outcomes] == ["level2/1_b"] and run.outcomes[0].level == "2"
    assert [p.problem for p in runner.prepares] == ["level2/1_b"]


def test_expand_levels_accepts_space_separated_values(tmp_path):
    assert expand_levels(["bench", "d", "--levels", "1", "2", "--jobs", "2"]) == \
        ["bench", "d", "--levels", "1", "--levels", "2", "--jobs", "2"]
    assert expand_levels(["bench", "--levels", "1", "level3", "d"]) == \
        ["bench", "--levels", "1", "--levels", "level3", "d"]
    assert expand_levels(["generate", "x.py"]) == ["generate", "x.py"]


# ---------------------------------------------------------------------------------------------
# reports and plots


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_reports_record_environment_command_metrics_and_plots(tmp_path):
    folder = make_dir(tmp_path, names=("1_fast", "2_slow", "3_wrong"))
    runner = FakeRunner(behaviours={
        "1_fast": Behaviour(speedup=2.5), "2_slow": Behaviour(speedup=0.8),
        "3_wrong": Behaviour(status="rejected"),
    })
    run = bench(tmp_path, folder, runner)
    data = json.loads(run.files["json"].read_text())
    assert data["command"] == "kernelstitch bench X"
    assert data["environment"] == ENV
    assert data["settings"]["build_jobs"] == 2 and data["settings"]["coder"] == "builtin"
    assert data["summary"]["accepted"] == 2 and data["summary"]["problems"] == 3
    assert data["summary"]["fast_p_vs_eager"] == {"0.0": 2 / 3, "1.0": 1 / 3, "1.5": 1 / 3,
                                                  "2.0": 1 / 3}
    assert data["summary"]["mean_roofline_fraction"] is None  # not profiled: never invented
    rows = {p["problem"]: p for p in data["problems"]}
    assert rows["1_fast"]["correct"] is True and rows["3_wrong"]["correct"] is False
    assert rows["1_fast"]["eager_spread_ms"] == [0.9, 1.1] and rows["1_fast"]["gpu"] in (0, 1)
    # The rejected candidate's verdict carried timings: none of them is reported.
    assert [rows["3_wrong"][k] for k in ("eager_ms", "candidate_ms", "speedup_vs_eager",
                                         "speedup_vs_compiled", "eager_spread_ms")] == [None] * 5

    markdown = run.files["markdown"].read_text()
    assert "`kernelstitch bench X`" in markdown and "2030-01-02T03:04:05" in markdown
    assert "Fake GPU; torch 9.9, CUDA 99.0" in markdown
    assert "| 1_fast | accepted | yes | 1.0000 (0.9000–1.1000) |" in markdown
    assert "| 3_wrong | rejected | yes | - | - | - | - | - | - |" in markdown
    assert "fast_p vs torch.compile" in markdown

    assert sorted(data["plots"]) == ["speedup_hist.png", "speedup_per_problem.png"]
    for name in data["plots"]:
        width, height = png_size(tmp_path / "out" / name)
        assert width > 100 and height > 100
        assert f"]({name})" in markdown


def test_plots_degrade_to_a_note_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    run = bench(tmp_path, make_dir(tmp_path, names=("1_a",)), FakeRunner())
    data = json.loads(run.files["json"].read_text())
    assert data["plots"] == [] and MISSING_NOTE in data["notes"]
    assert not list((tmp_path / "out").glob("*.png"))
    assert MISSING_NOTE in run.files["markdown"].read_text()


# ---------------------------------------------------------------------------------------------
# devices and Ray


def test_resolve_devices_maps_jobs_to_gpu_indices():
    assert resolve_devices(1, 0, None) == [None]
    assert resolve_devices(1, 4, "3") == [None]  # one job: the inherited default device
    assert resolve_devices(3, 4, None) == [0, 1, 2]
    assert resolve_devices(2, 2, "5,7") == [5, 7]  # through the parent's CUDA_VISIBLE_DEVICES
    with pytest.raises(BenchError, match="needs 4 GPUs but 2 are visible"):
        resolve_devices(4, 2, None)
    with pytest.raises(BenchError, match="UUID"):
        resolve_devices(2, 2, "GPU-aaaa,GPU-bbbb")


def test_ray_path_without_ray_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    folder = make_dir(tmp_path, names=("1_a",))
    with pytest.raises(BenchError, match="pip install 'ray\\[default\\]'"):
        run_bench(folder, tmp_path / "out", BenchSettings(ray_address="auto"), env=ENV,
                  workspace_root=tmp_path)
    assert not (tmp_path / "out").exists()  # failed before doing anything

    result = CliRunner().invoke(app, ["bench", str(folder), "--ray", "auto",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "needs the 'ray' package" in result.output


class Ref:
    def __init__(self, value):
        self.value = value


class FakeRay:
    """Runs remote functions inline; records the resources asked for."""

    def __init__(self):
        self.options, self.init_address, self.shut = None, None, False
        self.resources = {"CPU": 64.0, "GPU": 4.0, "accelerator_type:H100": 1.0}

    def init(self, address=None, ignore_reinit_error=False):
        self.init_address = address

    def remote(self, **options):
        self.options = options

        def wrap(fn):
            class Remote:
                @staticmethod
                def remote(*args):
                    return Ref(fn(*args))
            return Remote
        return wrap

    def wait(self, refs, num_returns=1, timeout=None):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.value

    def cancel(self, ref, force=False):
        pass

    def shutdown(self):
        self.shut = True

    def cluster_resources(self):
        return self.resources




def test_ray_path_runs_each_problem_as_a_one_gpu_task_with_the_same_results(tmp_path,
                                                                               monkeypatch):
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    folder = make_dir(tmp_path, names=("1_a", "2_b"))
    specs = discover(folder)
    seen = []

    def task(payload, settings):  # what evaluate_payload does, with the fake runner
        seen.append(payload)
        spec = ProblemSpec.from_json(payload)
        return evaluate_problem(FakeRunner(), spec, None, settings["time_limit_s"]).to_json()

    outcomes = run_on_ray("ray://head:10001", specs, BenchSettings(time_limit_s=60), task=task)
    assert fake.options["num_gpus"] == 1 and fake.init_address == "ray://head:10001"
    assert fake.shut
    assert [p["source"] for p in seen] == [s.path.read_text() for s in specs]  # file travels
    assert [o.problem for o in outcomes] == ["1_a", "2_b"]
    local = evaluate_problem(FakeRunner(), specs[0], None, 60).to_json()
    assert set(outcomes[0].to_json()) == set(local)  # same result format
    assert outcomes[0].status == "accepted"


def test_ray_results_share_the_resume_key_of_local_runs_on_the_same_gpus(tmp_path, monkeypatch):
    """On 4 x H100 a --ray run labelled its results `ray`, and reused none of the --jobs run's
    (bench/results/2026-11-26-h100-l3-all): a cluster of one accelerator kind that is this
    machine's is labelled with this machine's GPU name."""
    from kernelstitch.bench.ray_backend import resume_label

    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    h100 = "NVIDIA H100 80GB HBM3"
    assert resume_label("auto", [h100] * 4) == h100 and fake.shut
    assert resume_label("auto", []) == "ray:H100"  # a driver without GPUs: Ray runs share
    fake.resources = {**fake.resources, "accelerator_type:A100": 1.0}
    assert resume_label("auto", [h100]) == "ray:A100,H100"  # mixed: never a local run's key
    fake.resources = {"CPU": 8.0}
    assert resume_label("auto", [h100]) == "ray"
    spec = discover(make_dir(tmp_path, names=("1_a",)))[0]
    settings = BenchSettings()
    fake.resources = {"accelerator_type:H100": 1.0}
    assert resume_key(spec, settings, resume_label("auto", [h100]), "fp") == resume_key(spec, settings, h100, "fp")


def test_ray_task_failure_becomes_a_failed_problem(tmp_path, monkeypatch):
    fake = FakeRay()
    fake.get = lambda ref: (_ for _ in ()).throw(RuntimeError("node lost"))
    monkeypatch.setitem(sys.modules, "ray", fake)
    specs = discover(make_dir(tmp_path, names=("1_a",)))
    outcomes = run_on_ray("auto", specs, BenchSettings(), task=lambda p, s: {})
    assert outcomes[0].status == "failed" and "node lost" in outcomes[0].message
    # A lost node is not the problem's result: it is not stored, so a rerun runs it again.
    store = RunStore(tmp_path / "runs.sqlite")
    resume.record(store, specs[0], "key", outcomes[0])
    assert resume.lookup(store, "key", 900.0) is None


# ---------------------------------------------------------------------------------------------
# CLI


def test_cli_help_states_exit_status_and_options():
    result = CliRunner().invoke(app, ["bench", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for text in ("Exit status", "--levels", "--jobs", "--build-jobs", "--time-limit", "--rerun",
                 "--ray", "--profile", "--coder"):
        assert text in result.output


def test_cli_bad_folder_and_options_exit_2(tmp_path):
    missing = CliRunner().invoke(app, ["bench", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "not a folder" in missing.output
    folder = make_dir(tmp_path, names=("1_a",))
    bad = CliRunner().invoke(app, ["bench", str(folder), "--coder", "magic"])
    assert bad.exit_code == 2 and "--coder must be one of" in bad.output
    too_many = CliRunner().invoke(app, ["bench", str(folder), "--jobs", "64"])
    assert too_many.exit_code == 2 and "--jobs 64 needs 64 GPUs" in too_many.output
    out = ["--out", str(tmp_path / "out")]  # were a check to regress, not into the repository
    for option in ("--time-limit", "--build-jobs"):  # 0 is an error, not "the default"
        zero = CliRunner().invoke(app, ["bench", str(folder), option, "0", *out])
        assert zero.exit_code == 2 and option in zero.output
    # --coder llm without a model would run every problem with the built-in coder: refused.
    no_model = CliRunner().invoke(app, ["bench", str(folder), "--coder", "llm", *out],
                                  env={"KERNELSTITCH_LLM_MODEL": None})
    assert no_model.exit_code == 2 and "--coder llm: no LLM model configured" in no_model.output
    assert not (tmp_path / "out").exists()


def test_outcome_json_round_trip():
    outcome = ProblemOutcome(problem="p", status="accepted", message="m", eager_ms=1.0,
                             eager_spread_ms=[0.9, 1.2], reasons=["x"], notes=["n"])
    data = outcome.to_json()
    assert data["correct"] is True
    assert ProblemOutcome.from_json(data) == outcome


def test_environment_names_the_gpus_each_slot_uses():
    from kernelstitch.bench.report import environment

    gpus = {"torch": "2.9", "cuda": "12.8", "names": ["H100", "H100", "A100"]}
    env = environment([4, 5], gpus)
    assert env["devices"] == ["H100", "H100"] and env["device"] == "H100"
    assert (env["torch"], env["cuda"], env["gpu_count"]) == ("2.9", "12.8", 3)
    assert environment([None], gpus)["devices"] == ["H100"]
    assert environment([None], {"torch": "2.9", "cuda": None, "names": []})["device"] == "no GPU"
    assert {"date", "host", "python", "kernelstitch"} <= set(env)


def test_bandwidth_fraction_only_for_accepted_memory_bound_plans():
    from kernelstitch.bench.metrics import set_bandwidth_fractions, summarise
    from kernelstitch.bench.outcome import memory_bound_bytes
    from kernelstitch.bench.report import render_markdown

    fused = {"steps": [{"technique": "fused_elementwise", "estimated_bytes": 3 << 30},
                       {"technique": "fused_reduction", "estimated_bytes": 1 << 30}]}
    gemm = {"steps": [{"technique": "gemm_epilogue", "estimated_bytes": 1 << 30}]}
    assert memory_bound_bytes(fused) == 4 << 30
    assert memory_bound_bytes(gemm) is None  # compute-bound: bytes say nothing
    assert memory_bound_bytes({"steps": []}) is None and memory_bound_bytes(None) is None

    def outcome(name, status, plan_bytes, ms):
        return ProblemOutcome(problem=name, status=status, message="", candidate_ms=ms,
                              plan_bytes=plan_bytes)

    outcomes = [outcome("fast", "accepted", 2 << 30, 1.0),
                outcome("slow", "accepted", 1 << 30, 1.0),
                outcome("gemm", "accepted", None, 1.0),
                outcome("wrong", "rejected", 1 << 30, None)]
    peak = float(4 << 30) * 1e3  # bytes/s: 4 GiB per ms
    set_bandwidth_fractions(outcomes, peak)
    assert [o.bandwidth_fraction for o in outcomes] == [0.5, 0.25, None, None]
    summary = summarise(outcomes)
    assert summary["bandwidth_problems"] == 2
    assert summary["mean_bandwidth_fraction"] == pytest.approx(0.375)
    assert summary["min_bandwidth_fraction"] == 0.25
    markdown = render_markdown(outcomes, summary, {**ENV, "dram_bytes_per_s": peak}, "cmd")
    assert "| 50% |" in markdown and "mean 38%, lowest 25%" in markdown
    assert "DRAM bandwidth measured on this GPU at the start: 4295 GB/s" in markdown
    set_bandwidth_fractions(outcomes, None)  # no measurement: no fraction is invented
    assert all(o.bandwidth_fraction is None for o in outcomes)


def test_each_gpu_bandwidth_is_measured_and_each_problem_is_against_its_own_card():
    """Issue 28: with --jobs every card is measured (at once, each copy on its own card) and a
    problem's bandwidth fraction uses the card it ran on; a card that could not be measured
    falls back to the first card's value."""
    import threading

    from kernelstitch.bench.metrics import set_bandwidth_fractions, summarise
    from kernelstitch.bench.report import render_markdown
    from kernelstitch.bench.run import measure_dram_bandwidths

    seen, barrier = [], threading.Barrier(3, timeout=10)

    def measure(device, notes):
        seen.append(device)
        barrier.wait()  # all three measure at the same time, or this times out
        if device == 2:
            notes.append("GPU 2 failed")
            return None
        return {0: 3.0e12, 1: 2.0e12}[device]

    notes: list[str] = []
    by_gpu = measure_dram_bandwidths([0, 1, 2], notes, measure=measure)
    assert sorted(seen) == [0, 1, 2] and notes == ["GPU 2 failed"]
    assert by_gpu == {"0": 3.0e12, "1": 2.0e12}

    def outcome(gpu):
        return ProblemOutcome(problem=f"p{gpu}", status="accepted", message="", candidate_ms=1.0,
                              plan_bytes=1e9, gpu=gpu)

    outcomes = [outcome(0), outcome(1), outcome(2), outcome(1)]
    outcomes[3].reused = True  # from another run: its card number is that run's
    set_bandwidth_fractions(outcomes, 3.0e12, by_gpu)
    assert [round(o.bandwidth_fraction, 3) for o in outcomes] == [0.333, 0.5, 0.333, 0.333]
    markdown = render_markdown(outcomes, summarise(outcomes), {**ENV, "dram_bytes_per_s": 3.0e12,
                                              "dram_bytes_per_s_by_gpu": by_gpu}, "cmd")
    assert "measured on each GPU at the start: GPU 0 3000, GPU 1 2000 GB/s" in markdown


# ---------------------------------------------------------------------------------------------
# KernelBench trees: published baselines, resume from another machine's copy


def make_kernelbench(root):
    """A KernelBench-like tree: two level folders and baseline_H100_Modal/."""
    write_problem(root / "level1" / "19_ReLU.py")
    write_problem(root / "level2" / "1_Conv.py", scale=3.0)
    base = root / "baseline_H100_Modal"
    base.mkdir(parents=True)
    for name, ms in (("baseline_time_torch.json", 2.0),
                     ("baseline_time_torch_compile_inductor_default.json", 1.5)):
        (base / name).write_text(json.dumps({"level1": {"19_ReLU.py": {
            "mean": ms, "std": 0.01, "hardware": "NVIDIA H100 80GB HBM3"}}}))
    return root


def test_published_kernelbench_baselines_are_extra_columns(tmp_path):
    kb = make_kernelbench(tmp_path / "kb")
    run = bench(tmp_path, kb, FakeRunner())
    data = json.loads(run.files["json"].read_text())
    rows = {p["problem"]: p for p in data["problems"]}
    assert (rows["level1/19_ReLU"]["published_eager_ms"],
            rows["level1/19_ReLU"]["published_compiled_ms"]) == (2.0, 1.5)
    assert rows["level2/1_Conv"]["published_eager_ms"] is None  # not in their tables
    assert data["environment"]["published_baselines"]["hardware"] == "NVIDIA H100 80GB HBM3"
    published = data["summary"]["published_baselines"]
    assert published["problems"] == 1 and published["geomean_eager_vs_published"] == 0.5
    assert "| 2.000 | 1.500 |" in run.files["markdown"].read_text()
    # the level folder itself as DIRECTORY finds them too; a plain folder has none
    level1 = bench(tmp_path, kb / "level1", FakeRunner(), out="o2")
    assert level1.outcomes[0].published_eager_ms == 2.0
    plain = bench(tmp_path, make_dir(tmp_path), FakeRunner(), out="o3")
    assert all(o.published_eager_ms is None for o in plain.outcomes)
    assert "published_baselines" not in json.loads(plain.files["json"].read_text())["environment"]


def test_resume_on_another_machine_with_the_problems_at_another_path(tmp_path):
    """The device calls: the copy lies at <checkout>/.kb/kernelbench, the checkout's path differs
    per machine, and the returned (bench-only) run store is carried as .kb/runs.sqlite."""
    first, second = tmp_path / "machine1" / "repo", tmp_path / "machine2" / "work"
    for root in (first, second):
        make_kernelbench(root / ".kb" / "kernelbench")
        (root / "pyproject.toml").write_text("")
    settings = BenchSettings(build_jobs=2)
    done = run_bench(first / ".kb" / "kernelbench", tmp_path / "o1", settings, levels=["1"],
                     runner=FakeRunner(), devices=[0], env=ENV)
    assert [o.reused for o in done.outcomes] == [False]
    returned = tmp_path / "returned.sqlite"
    assert resume.export_store(first / ".kernelstitch" / "runs.sqlite", returned) == 1

    (second / ".kernelstitch").mkdir()
    (second / ".kernelstitch" / "runs.sqlite").write_bytes(returned.read_bytes())
    runner = FakeRunner()
    again = run_bench(second / ".kb" / "kernelbench", tmp_path / "o2", settings,
                      levels=["1", "2"], runner=runner, devices=[0], env=ENV)
    assert [(o.problem, o.reused) for o in again.outcomes] == [
        ("level1/19_ReLU", True), ("level2/1_Conv", False)]
    assert [m.problem for m in runner.measures] == ["level2/1_Conv"]
    assert again.outcomes[0].published_eager_ms == 2.0  # set again on the reused outcome


def test_exported_store_keeps_only_bench_results(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    other = store.start_run("generate", "x.py", "Model", {})
    store.add_artifact(other, "candidate", "model_new.py", "x" * 100_000)
    spec = spec_for(write_problem(tmp_path / "1_a.py"))
    outcome = ProblemOutcome(problem="1_a", status="accepted", message="ok")
    resume.record(store, spec, "key", outcome)
    assert resume.export_store(tmp_path / "runs.sqlite", tmp_path / "out.sqlite") == 1
    assert (tmp_path / "out.sqlite").stat().st_size < 50_000
    exported = RunStore(tmp_path / "out.sqlite")
    assert resume.lookup(exported, "key", 900.0).status == "accepted"
    assert exported.get_run(other) is None


def test_one_sigint_twice_in_a_row_stops_but_does_not_abort(monkeypatch):
    """`timeout -s INT` signals the bench and then its process group: two SIGINTs at once must
    still write the report; a later second Ctrl-C aborts."""
    import os
    import signal

    from kernelstitch.bench import cli

    stop = threading.Event()
    previous = cli._install_sigint(stop, type("Err", (), {"print": lambda *a, **k: None})())
    try:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.is_set()
        now = cli.time.monotonic()
        monkeypatch.setattr(cli.time, "monotonic", lambda: now + cli.SIGINT_REPEAT_S + 1)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            cli.time.sleep(0)  # the handler runs at the next bytecode
    finally:
        cli._restore_sigint(previous)
