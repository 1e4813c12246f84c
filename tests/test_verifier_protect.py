"""The candidate cannot change what it is judged against (protect.py, snapshot.py, sandbox.py).

On the CPU: the reference snapshot and its hashes, the post-run checks (reference, verifier
source, workspace, the judge's ledger), the write guard of a candidate worker (Landlock, tried
with real writes), the scrubbed environment, and the cheating candidates imported in a guarded
worker exactly as candidate_task imports them.  The full verify path with those candidates needs
a GPU: test_verifier_protect_gpu.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest
from kernelstitch.agents.verifier import Verdict, render_verdict_markdown
from kernelstitch.agents.verifier.protect import Protection, compile_cache_roots
from kernelstitch.agents.verifier.snapshot import (
    SnapshotError,
    local_import_closure,
    take_reference_snapshot,
    verifier_manifest,
)
from kernelstitch.agents.verifier.verdict import REJECTION_CODES, Reason

from kernelstitch.core import sandbox
from kernelstitch.core.worker.client import WorkerClient

TESTS_DIR = Path(__file__).parent
CANDIDATES = TESTS_DIR / "candidates"
ABI, WHY_NOT = sandbox.landlock_abi()
needs_landlock = pytest.mark.skipif(ABI == 0, reason=f"no Landlock here: {WHY_NOT}")
MARKER = ".ks_sandbox_test"  # arms the cheating candidates (tests/candidates/cheat_*.py)


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def workspace(tmp_path: Path, *names: str) -> Path:
    """A user's workspace: the reference, the shared extension and the named candidates, with
    the marker that arms the cheats (never armed in the repository)."""
    folder = tmp_path / "ws"
    folder.mkdir()
    for name in ("ref_scale_relu.py", "_scale_relu_ext.py", *names):
        shutil.copy(CANDIDATES / name, folder / name)
    (folder / MARKER).write_text("")
    return folder


def files_of(folder: Path) -> dict[str, str]:
    return {p.name: sha(p) for p in sorted(folder.iterdir()) if p.is_file()}


def guarded_client(options: dict) -> WorkerClient:
    return WorkerClient(allowed_prefixes=("worker_tasks.",), extra_sys_path=(str(TESTS_DIR),),
                        **options)


# --------------------------------------------------------------------------------------------
# The snapshot


def test_the_snapshot_copies_the_reference_and_its_local_imports_read_only(tmp_path):
    user = tmp_path / "user"
    (user / "ks_pkg").mkdir(parents=True)
    (user / "ks_helper.py").write_text("SCALE = 3.0\n")
    (user / "ks_pkg" / "__init__.py").write_text("from .inner import OFFSET\n")
    (user / "ks_pkg" / "inner.py").write_text("OFFSET = 1.0\n")
    (user / "unrelated.py").write_text("raise SystemExit('never imported')\n")
    reference = user / "problem.py"
    reference.write_text(
        "import torch\nfrom torch import nn\nimport ks_helper\nfrom ks_pkg import OFFSET\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n"
        "        import importlib\n        dyn = importlib.import_module('ks_dynamic')\n"
        "        return x * ks_helper.SCALE + OFFSET + dyn.EXTRA\n\n"
        "def get_inputs():\n    return [torch.ones(2)]\n")
    (user / "ks_dynamic.py").write_text("EXTRA = 10.0\n")  # invisible to the scan
    closure = [p.relative_to(user).as_posix() for p in local_import_closure(reference)]
    assert closure[0] == "problem.py"
    assert set(closure) == {"problem.py", "ks_helper.py", "ks_pkg/__init__.py",
                            "ks_pkg/inner.py"}
    snap = take_reference_snapshot(reference, tmp_path / "private")
    assert snap.sha256 == sha(reference) and snap.copy.read_bytes() == reference.read_bytes()
    assert not snap.copy.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert not snap.root.stat().st_mode & stat.S_IWUSR
    assert snap.changed_sources() == [] and snap.changed_copies() == []
    # loaded in a worker from the copy: local imports come from the snapshot, a dynamic one
    # from the user's folder (appended last on sys.path)
    with guarded_client({}) as client:
        response = client.call("worker_tasks.guard:load_reference",
                               {"path": str(snap.copy), "fallback": str(user)}, timeout_s=120)
    assert response.ok, response.error
    files = response.result["files"]
    assert response.result["reference"] == str(snap.copy)
    assert files["ks_helper"] == str(snap.root / "ks_helper.py")
    assert files["ks_pkg.inner"] == str(snap.root / "ks_pkg" / "inner.py")
    assert files["ks_dynamic"] == str(user / "ks_dynamic.py")
    assert response.result["value"] == [14.0, 14.0]


def test_a_reference_with_too_many_local_files_cannot_be_snapshotted(tmp_path, monkeypatch):
    from kernelstitch.agents.verifier import snapshot

    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_FILES", 2)
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "problem.py").write_text("import a\nimport b\nimport c\n")
    with pytest.raises(SnapshotError, match="more than 2 local files"):
        take_reference_snapshot(tmp_path / "problem.py", tmp_path / "private")


def _protection(tmp_path: Path, *candidates: str) -> tuple[Path, Protection]:
    folder = workspace(tmp_path, *candidates)
    protection = Protection.begin(folder / "ref_scale_relu.py",
                                  folder / (candidates[0] if candidates else "ref_scale_relu.py"))
    return folder, protection


def test_the_verdict_records_the_snapshot_hash_and_the_guard(tmp_path):
    folder, protection = _protection(tmp_path, "honest_scale_relu.py")
    try:
        verdict = protection.finish(Verdict("accepted"))
    finally:
        protection.close()
    assert verdict.status == "accepted"
    assert verdict.reference_sha256 == sha(folder / "ref_scale_relu.py")
    assert verdict.verifier_sha256 == verifier_manifest().sha256
    assert verdict.write_guard.startswith("write guard: ")
    assert Verdict.from_json(verdict.to_json()) == verdict
    text = render_verdict_markdown(verdict)
    assert f"reference sha256 `{verdict.reference_sha256[:16]}`" in text
    assert verdict.write_guard in text
    assert not protection.snapshot.root.exists()  # close() removes the read-only copy


def test_a_changed_reference_is_a_rejection_whatever_else_happened(tmp_path):
    folder, protection = _protection(tmp_path, "honest_scale_relu.py")
    reference = folder / "ref_scale_relu.py"
    reference.write_text(reference.read_text().replace("torch.relu(", "torch.zeros_like("))
    try:
        for before in (Verdict("accepted"), Verdict("could_not_verify", [Reason("no_gpu", "x")]),
                       Verdict("rejected", [Reason("wrong_output", "bad")])):
            verdict = protection.finish(before)
            assert verdict.status == "rejected" and verdict.codes()[0] == "reference_modified"
            assert "ref_scale_relu.py" in verdict.reasons[0].message
            assert verdict.timings is None
        assert verdict.codes() == ["reference_modified", "wrong_output"]
    finally:
        protection.close()


def test_a_written_snapshot_copy_is_a_rejection(tmp_path):
    _, protection = _protection(tmp_path, "honest_scale_relu.py")
    try:
        copy = protection.snapshot.copy
        os.chmod(copy.parent, stat.S_IRWXU)
        os.chmod(copy, stat.S_IRUSR | stat.S_IWUSR)
        copy.write_text("# replaced\n")
        verdict = protection.finish(Verdict("accepted"))
    finally:
        protection.close()
    assert verdict.codes() == ["reference_modified"]
    assert "read-only copy" in verdict.reasons[0].message


def test_a_changed_verifier_source_is_a_rejection(tmp_path, monkeypatch):
    from kernelstitch.agents.verifier import snapshot

    tree = tmp_path / "verifier"
    tree.mkdir()
    (tree / "judge.py").write_text("FAIR = True\n")
    monkeypatch.setattr(snapshot, "verifier_roots", lambda: {"verifier": tree})
    _, protection = _protection(tmp_path, "honest_scale_relu.py")
    (tree / "judge.py").write_text("FAIR = False\n")
    try:
        verdict = protection.finish(Verdict("accepted"))
    finally:
        protection.close()
    assert verdict.codes() == ["verifier_modified"]
    assert "verifier/judge.py" in verdict.reasons[0].message


class _Hello:
    def __init__(self, guard: dict | None) -> None:
        self.hello = {"pid": 1, "guard": guard}


def test_workspace_changes_are_rejected_without_a_guard_and_only_noted_with_one(tmp_path):
    folder, protection = _protection(tmp_path, "honest_scale_relu.py")
    try:
        (folder / "planted.py").write_text("X = 1\n")
        (folder / "_scale_relu_ext.py").write_text("# changed\n")
        protection.watch(_Hello(sandbox.GuardStatus(False, 0, "no Landlock").to_json()))
        verdict = protection.finish(Verdict("accepted"))
        assert verdict.codes() == ["workspace_modified"]
        assert "planted.py (new)" in verdict.reasons[0].message
        assert "_scale_relu_ext.py" in verdict.reasons[0].message
        assert verdict.write_guard == "write guard: unavailable (no Landlock), detection by " \
                                      "hashing"
        protection.clients = [_Hello(sandbox.GuardStatus(True, 7, "", ("/x",), True).to_json())]
        verdict = protection.finish(Verdict("accepted"))
        assert verdict.status == "accepted"
        assert verdict.write_guard == "write guard: landlock ABI v7, no TCP"
        assert any("not by the candidate" in n for n in verdict.notes)
        # a compile cache pointed at the workspace: the guard does not cover it
        exposed = sandbox.GuardStatus(True, 7, "", (str(tmp_path),), True).to_json()
        protection.clients = [_Hello(exposed)]
        verdict = protection.finish(Verdict("accepted"))
        assert verdict.codes() == ["workspace_modified"]
        assert "holds the workspace" in verdict.write_guard
    finally:
        protection.close()


def test_checks_the_judge_never_compared_clean_are_judge_bypassed(tmp_path):
    _, protection = _protection(tmp_path, "honest_scale_relu.py")
    checks = [{"name": "initial:s1", "case": "s1", "passed": True},
              {"name": "after_warmup:s2", "case": "s2", "passed": True},
              {"name": "recheck:s1", "case": "s1", "passed": True},
              {"name": "timing:calls", "case": None, "passed": False}]
    protection.candidate_results = [{"checks": checks}]
    try:
        protection.ledger = [{"case": "s1", "error": False, "codes": []},
                             {"case": "s2", "error": False, "codes": []},
                             {"case": "s1", "error": False, "codes": []}]
        assert protection.finish(Verdict("accepted")).status == "accepted"
        protection.ledger = [{"case": "s1", "error": False, "codes": []},
                             {"case": "s2", "error": False, "codes": ["wrong_output"]}]
        verdict = protection.finish(Verdict("accepted"))
        assert verdict.codes() == ["judge_bypassed"]
        assert verdict.reasons[0].detail["cases"] == ["s1", "s2"]
        # the check under the timing settings needs a comparison made at its bound, and a
        # comparison at that looser bound never vouches for a strict check of the same case
        timed = {"name": "timing_settings:s2", "case": "s2", "passed": True}
        protection.candidate_results = [{"checks": [*checks, timed]}]
        strict_s2 = {"case": "s2", "error": False, "codes": []}
        loose_s2 = {"case": "s2", "error": False, "codes": [], "timing_settings": True}
        protection.ledger = [{"case": "s1", "error": False, "codes": []}, strict_s2,
                             {"case": "s1", "error": False, "codes": []}, loose_s2]
        assert protection.finish(Verdict("accepted")).status == "accepted"
        protection.ledger = [{"case": "s1", "error": False, "codes": []}, loose_s2,
                             {"case": "s1", "error": False, "codes": []}, loose_s2]
        verdict = protection.finish(Verdict("accepted"))
        assert verdict.codes() == ["judge_bypassed"] and verdict.reasons[0].detail["cases"] == ["s2"]
        protection.candidate_results = [{"checks": checks}]
        protection.ledger, protection.ledger_error = None, "the judge's record could not be read"
        verdict = protection.finish(Verdict("accepted"))
        assert (verdict.status, verdict.codes()) == ("could_not_verify", ["verifier_error"])
    finally:
        protection.close()


def test_the_new_codes_are_stable_rejection_codes():
    assert {"reference_modified", "verifier_modified", "workspace_modified",
            "writes_outside_sandbox", "judge_bypassed"} <= REJECTION_CODES


# --------------------------------------------------------------------------------------------
# The candidate worker's sandbox


def test_the_candidate_sandbox_writes_only_to_its_private_folder_and_the_caches(tmp_path):
    folder, protection = _protection(tmp_path, "honest_scale_relu.py")
    work = tmp_path / "work"
    try:
        options = protection.candidate_worker_options(str(work))
    finally:
        protection.close()
    private = work / "candidate"
    assert options["cwd"] == str(private) and options["scrub_env"] is True
    assert options["write_guard"] == (str(private), *compile_cache_roots(), "/dev")
    assert options["env"]["TMPDIR"] == str(private / "tmp-cache")
    assert all(str(private) in options["env"][k] for k in
               ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH"))
    assert str(folder) not in " ".join(options["write_guard"])


@needs_landlock
def test_landlock_refuses_writes_outside_the_allowed_folders(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "user"
    allowed.mkdir()
    outside.mkdir()
    (outside / "model.py").write_text("original\n")
    with guarded_client({"write_guard": (str(allowed), "/dev")}) as client:
        assert client.call("worker_tasks.basic:pid", timeout_s=30).ok
        guard = sandbox.GuardStatus.from_json(client.hello["guard"])
        assert guard.enforced and guard.abi == ABI and guard.deny_tcp == (ABI >= 4)
        assert guard.capabilities_dropped == (os.geteuid() == 0)

        def write(path: Path) -> str:
            response = client.call("worker_tasks.guard:try_write", {"path": str(path)},
                                   timeout_s=30)
            assert response.ok, response.error
            return response.result

        assert write(allowed / "fine.txt") == "ok"
        assert write(Path("/dev/null")) == "ok"
        assert write(outside / "model.py") == "PermissionError"
        assert write(outside / "new.py") == "PermissionError"
        child = client.call("worker_tasks.guard:try_child_write",
                            {"path": str(outside / "by_child.txt")}, timeout_s=30)
        assert child.ok and child.result != 0  # nvcc, ninja... inherit the guard
        attempts = client.call("worker_tasks.guard:write_attempts", timeout_s=30).result
    assert (outside / "model.py").read_text() == "original\n"
    assert sorted(p.name for p in outside.iterdir()) == ["model.py"]
    assert {a["path"] for a in attempts} == {str(outside / "model.py"), str(outside / "new.py")}
    assert (allowed / "fine.txt").exists()


def test_a_guard_that_is_not_enforced_says_detection_by_hashing():
    status = sandbox.GuardStatus(False, 0, "the kernel has no Landlock (ENOSYS)")
    assert status.describe() == ("write guard: unavailable (the kernel has no Landlock "
                                 "(ENOSYS)), detection by hashing")
    assert sandbox.GuardStatus.from_json(status.to_json()) == status


@needs_landlock
def test_a_guarded_worker_cannot_read_the_environment_of_the_process_that_started_it(tmp_path):
    """/proc/PPID/environ holds the verifier's environment as it was started (API keys a shell
    exported); Landlock hides it, once a root worker has no CAP_SYS_PTRACE."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import json
        from kernelstitch.core.worker.client import WorkerClient
        with WorkerClient(allowed_prefixes=("worker_tasks.",), write_guard=({str(tmp_path)!r},),
                          extra_sys_path=({str(TESTS_DIR)!r},), scrub_env=True) as client:
            response = client.call("worker_tasks.guard:parent_environment")
            print(json.dumps(response.result if response.ok else str(response.error)))
    """)
    planted = "ks-planted-secret-0123456789"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "OPENAI_API_KEY": planted},
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '"PermissionError"', out.stdout


def test_secrets_are_scrubbed_from_a_candidate_workers_environment(tmp_path, monkeypatch):
    planted = "ks-planted-secret-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    monkeypatch.setenv("HF_TOKEN", planted + "hf")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value")
    monkeypatch.setenv("MY_LLM", "named-by-the-llm-config")  # the LLM config's api_key_env
    monkeypatch.setenv("INNOCENT_NAME", "sk-proj-abcdefghijklmnopqrstuvwxyz")  # a key's shape
    monkeypatch.setenv("COPY_OF_IT", planted)  # the same value under a harmless name
    monkeypatch.setenv("KS_KEEP_ME", "plain value")
    folder = workspace(tmp_path, "honest_scale_relu.py")
    protection = Protection.begin(folder / "ref_scale_relu.py", folder / "honest_scale_relu.py",
                                  secret_env=("MY_LLM",))
    try:
        options = protection.candidate_worker_options(str(tmp_path / "work"))
        with guarded_client(options) as client:
            response = client.call("worker_tasks.guard:environment", timeout_s=30)
            assert response.ok, response.error
            scrubbed = client.scrubbed_env_names
    finally:
        protection.close()
    env = response.result["env"]
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_LLM",
                 "INNOCENT_NAME", "COPY_OF_IT"):
        assert name not in env and name in scrubbed
    assert not [k for k, v in env.items() if planted in v]
    assert env["KS_KEEP_ME"] == "plain value"
    assert env["TMPDIR"] == str(tmp_path / "work" / "candidate" / "tmp-cache")
    assert response.result["cwd"] == str(tmp_path / "work" / "candidate")


@pytest.mark.parametrize("name, value, secret", [
    ("OPENAI_API_KEY", "x", True), ("GITHUB_TOKEN", "x", True), ("DB_PASSWORD", "x", True),
    ("SSH_AUTH_SOCK", "/tmp/agent", True), ("TOKENIZERS_PARALLELISM", "false", False),
    ("KEYTIMEOUT", "1", False), ("PATH", "/usr/bin", False),
    ("CUDA_VISIBLE_DEVICES", "0", False), ("XAUTHORITY", "/x", False),
    ("SOMETHING", "hf_abcdefghijklmnopqrstuvwxyz", True), ("SOMETHING", "sk-no", False),
])
def test_what_counts_as_a_secret(name, value, secret):
    kept, dropped = sandbox.scrub_env({name: value})
    assert (name in dropped) == secret and (name in kept) != secret


# --------------------------------------------------------------------------------------------
# The cheating candidates, imported in a guarded worker as candidate_task imports them


def _import_in_sandbox(tmp_path: Path, name: str) -> tuple[Path, dict, Verdict, dict]:
    pytest.importorskip("torch")
    folder = workspace(tmp_path, name)
    before = files_of(folder)
    protection = Protection.begin(folder / "ref_scale_relu.py", folder / name)
    try:
        options = protection.candidate_worker_options(str(tmp_path / "work"))
        with guarded_client(options) as client:
            protection.watch(client)
            response = client.call("worker_tasks.guard:import_candidate", {
                "path": str(folder / name), "reference_path": str(protection.snapshot.copy),
                "fallback": protection.import_fallback}, timeout_s=240)
        result = response.result if response.ok else None
        protection.candidate_results = [result]
        verdict = protection.finish(Verdict("could_not_verify", [Reason("no_gpu", "CPU")]))
    finally:
        protection.close()
    return folder, before, verdict, {"response": response}


GUARD_MODES = [pytest.param("landlock", marks=needs_landlock), "detection"]


@pytest.fixture(params=GUARD_MODES)
def guard_mode(request, monkeypatch):
    """Each cheat under the write guard, and with Landlock turned off (the fallback)."""
    if request.param == "detection":
        monkeypatch.setenv(sandbox.DISABLE_ENV, "1")
    return request.param


def test_a_candidate_that_rewrites_its_reference_is_rejected(tmp_path, guard_mode):
    folder, before, verdict, info = _import_in_sandbox(tmp_path, "cheat_rewrites_reference.py")
    assert info["response"].ok, info["response"].error
    assert verdict.status == "rejected"
    reference = str(folder / "ref_scale_relu.py")
    if guard_mode == "landlock":
        assert verdict.codes() == ["writes_outside_sandbox"]
        assert reference in verdict.reasons[0].detail["paths"]
        assert "refused by the write guard" in verdict.reasons[0].message
        assert files_of(folder) == before  # the user's files are untouched
        assert verdict.write_guard.startswith("write guard: landlock ABI")
    else:  # detection: the change itself is named, whatever else happened
        assert verdict.codes() == ["reference_modified", "writes_outside_sandbox"]
        assert "ref_scale_relu.py" in verdict.reasons[0].message
        assert "zeros_like" in (folder / "ref_scale_relu.py").read_text()  # it did write
        assert "detection by hashing" in verdict.write_guard
    assert any("CPU" in n for n in verdict.notes)


def test_a_candidate_that_writes_into_the_workspace_is_rejected(tmp_path, guard_mode):
    # Its writes come first; on a machine without nvcc its extension then fails to build.
    folder, before, verdict, info = _import_in_sandbox(tmp_path, "cheat_writes_workspace.py")
    assert info["response"].ok, info["response"].error
    assert verdict.status == "rejected"
    written = {str(folder / "planted_by_candidate.py"), str(folder / "_scale_relu_ext.py")}
    if guard_mode == "landlock":
        assert verdict.codes() == ["writes_outside_sandbox"]
        assert written <= set(verdict.reasons[0].detail["paths"])
        assert files_of(folder) == before
    else:
        assert verdict.codes() == ["workspace_modified", "writes_outside_sandbox"]
        assert "planted_by_candidate.py (new)" in verdict.reasons[0].message
        assert "no write guard was enforced" in verdict.reasons[0].message
