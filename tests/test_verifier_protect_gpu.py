"""The full verify path on a GPU with candidates that go after what they are judged against.

Each runs in a temporary copy of tests/candidates (armed by its marker), under the write guard
and, where the kernel has Landlock, once more with it turned off (detection by hashing).  Set
KS_VERDICT_DIR to keep every verdict as JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier import Verdict, VerifyOptions, verify

from kernelstitch.core import sandbox

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CANDIDATES = Path(__file__).parent / "candidates"
QUICK = VerifyOptions(seeds=2, shape_variants=0, timing=False, compare_compile=False,
                      timeout_s=300)
ABI, WHY_NOT = sandbox.landlock_abi()
MODES = [pytest.param("landlock", marks=pytest.mark.skipif(ABI == 0, reason=WHY_NOT)),
         "detection"]


def _files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


def _workspace(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    for file in ("ref_scale_relu.py", "_scale_relu_ext.py", name):
        shutil.copy(CANDIDATES / file, folder / file)
    (folder / ".ks_sandbox_test").write_text("")
    return folder


def _keep(name: str, mode: str, verdict: Verdict) -> None:
    out = os.environ.get("KS_VERDICT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"protect_{Path(name).stem}_{mode}.json").write_text(
            json.dumps(verdict.to_json(), indent=1))
    print(name, mode, verdict.status, verdict.codes(), verdict.write_guard)


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    if request.param == "detection":
        monkeypatch.setenv(sandbox.DISABLE_ENV, "1")
    return request.param


def _run(tmp_path: Path, name: str, mode: str) -> tuple[Path, dict, Verdict]:
    folder = _workspace(tmp_path, name)
    before = _files(folder)
    verdict = verify(folder / "ref_scale_relu.py", folder / name, options=QUICK)
    _keep(name, mode, verdict)
    return folder, before, verdict


def test_an_honest_candidate_is_accepted_under_the_guard_with_its_reference_hash(tmp_path,
                                                                                  mode):
    folder, before, verdict = _run(tmp_path, "honest_scale_relu.py", mode)
    assert verdict.status == "accepted", verdict.reasons
    assert verdict.reference_sha256 == before["ref_scale_relu.py"]
    assert verdict.verifier_sha256 and len(verdict.verifier_sha256) == 64
    expected = "write guard: landlock ABI" if mode == "landlock" else "detection by hashing"
    assert expected in verdict.write_guard
    assert _files(folder) == before


def test_a_candidate_rewriting_its_reference_is_rejected(tmp_path, mode):
    folder, before, verdict = _run(tmp_path, "cheat_rewrites_reference.py", mode)
    assert verdict.status == "rejected"
    codes = set(verdict.codes())
    # the judge compared against the snapshot, whatever the candidate did to the file
    assert "wrong_output" in codes and "writes_outside_sandbox" in codes, verdict.reasons
    if mode == "landlock":
        assert "reference_modified" not in codes
        assert _files(folder) == before
    else:
        assert verdict.codes()[0] == "reference_modified"


def test_a_candidate_writing_into_the_workspace_is_rejected(tmp_path, mode):
    folder, before, verdict = _run(tmp_path, "cheat_writes_workspace.py", mode)
    assert verdict.status == "rejected"
    codes = set(verdict.codes())
    assert "writes_outside_sandbox" in codes, verdict.reasons
    if mode == "landlock":
        assert _files(folder) == before
        assert "workspace_modified" not in codes
    else:
        assert "workspace_modified" in codes


def test_a_candidate_forging_the_judges_replies_is_judge_bypassed(tmp_path):
    _, _, verdict = _run(tmp_path, "cheat_forges_judge.py", "landlock" if ABI else "detection")
    assert verdict.status == "rejected"
    assert "judge_bypassed" in verdict.codes(), verdict.reasons
    assert "wrong_output" not in verdict.codes()  # the forged replies hid it


def test_no_credential_reaches_the_candidate(tmp_path):
    """verify() in a process started with planted keys, as a user's shell would start it."""
    folder = _workspace(tmp_path, "probe_env_secrets.py")
    planted = "ks-planted-secret-0123456789"
    env = {**os.environ, "OPENAI_API_KEY": planted, "HF_TOKEN": planted + "x",
           "MY_LLM_VARIABLE": planted + "y", "HARMLESS_COPY": planted}
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from kernelstitch.agents.verifier import VerifyOptions, verify
        folder = Path({str(folder)!r})
        verdict = verify(folder / "ref_scale_relu.py", folder / "probe_env_secrets.py",
                         options=VerifyOptions(seeds=2, shape_variants=0, timing=False,
                                               compare_compile=False, timeout_s=300),
                         secret_env=("MY_LLM_VARIABLE",))
        print("VERDICT " + json.dumps(verdict.to_json()))
    """)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=600)
    line = next(x for x in out.stdout.splitlines() if x.startswith("VERDICT "))
    verdict = Verdict.from_json(line.removeprefix("VERDICT "))
    _keep("probe_env_secrets.py", "subprocess", verdict)
    text = json.dumps(verdict.to_json())
    assert "secrets in the candidate's environment" not in text, verdict.reasons
    assert planted not in text
    if ABI:  # the guard (with a root worker's capabilities dropped) also hides /proc/PPID
        assert verdict.status == "accepted", verdict.reasons
    else:  # without Landlock a same-user process reads the verifier's initial environment
        assert verdict.status == "accepted" or "readable through /proc" in text, verdict.reasons
