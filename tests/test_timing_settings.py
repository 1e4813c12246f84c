"""Programs are timed under PyTorch's default numeric settings and checked in strict fp32.

PyTorch runs cuDNN convolutions and RNNs in TF32 unless a user turns it off; timing the original
with TF32 off (as the Verifier did until 2026-11-27) made convolution problems' baselines 2-2.3x
slower than users run them.  These CPU tests pin what the settings are, that every timing scope
applies them and gives strict fp32 back, and how the judge compares the one check a candidate
makes under them (a candidate that reads the flags to skip work while timed fails it)."""

from __future__ import annotations

import subprocess
import sys

import torch
from kernelstitch.agents.verifier.reference_task import _Judge


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.strip()


def test_the_defaults_are_torchs_own_read_before_anything_changes_them():
    # a fresh process, as a worker: read at import, before strict_fp32() can run
    out = _run("import torch\n"
               "stock = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)\n"
               "from kernelstitch.agents.verifier.gpu_common import PYTORCH_DEFAULTS, strict_fp32\n"
               "strict_fp32()\n"
               "print(stock, PYTORCH_DEFAULTS, PYTORCH_DEFAULTS == stock)")
    # torch 2.x: matmuls in fp32, cuDNN convolutions in TF32 by default; strict_fp32() leaves
    # the snapshot alone
    assert out == "(False, True) (False, True) True"


def test_every_timing_scope_applies_the_defaults_and_gives_strict_fp32_back():
    out = _run(
        "import torch\n"
        "from kernelstitch.agents.verifier.gpu_common import strict_fp32\n"
        "from kernelstitch.agents.verifier.precision_scope import (baseline_precision,\n"
        "    pytorch_defaults, timing_settings)\n"
        "flags = lambda: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)\n"
        "strict_fp32()\n"
        "seen = []\n"
        "for scope in (pytorch_defaults(), baseline_precision('fp32'), baseline_precision('tf32'),\n"
        "              baseline_precision('strict'), timing_settings('fp32'),\n"
        "              timing_settings('strict'), timing_settings('bf16')):\n"
        "    with scope:\n"
        "        seen.append(flags())\n"
        "    assert flags() == (False, False), 'strict fp32 back'\n"
        "print(seen)")
    # PyTorch's defaults for fp32 (and for a reduced program, which sets its own precision
    # inside forward), TF32 off under strict, TF32 on for the tf32 baselines
    assert out == ("[(False, True), (False, True), (True, True), (False, False), (False, True), "
                   "(False, False), (False, True)]")


class _Doubling(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


class _Tf32Like(torch.nn.Module):
    """Stands in for a cuDNN convolution on this CPU: 1e-3 off when cuDNN's TF32 is allowed."""

    def forward(self, x):
        return x * (2.0 * (1 + 1e-3) if torch.backends.cudnn.allow_tf32 else 2.0)


def _judge(model: torch.nn.Module) -> _Judge:
    return _Judge(problem=None, model=model, dev=torch.device("cpu"), cases=[])


def _info(t: torch.Tensor) -> list[dict]:
    return [{"device": "cpu", "contiguous": True, "strides": list(t.stride())}]


def _failures(judge: _Judge, x: torch.Tensor, cand: torch.Tensor) -> list[str]:
    with torch.no_grad():
        reference = [judge.model(x)]  # the judge's own: strict fp32
    return [f.code for f in judge._compare_timing_settings([x], reference, [cand], [None],
                                                            _info(cand), "cpu")]


def test_where_the_defaults_change_the_original_the_check_allows_tf32_error_and_no_more():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    judge = _judge(_Tf32Like())
    assert _failures(judge, x, x * 2.0 * (1 + 1e-3)) == []  # the original's own error there
    assert _failures(judge, x, torch.zeros_like(x)) == ["wrong_output"]  # skipped work
    assert _failures(judge, x, x * 2.0 * 1.05) == ["wrong_output"]


def test_where_the_defaults_change_nothing_a_program_may_not_lower_its_precision_when_timed():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    judge = _judge(_Doubling())
    assert _failures(judge, x, x * 2.0) == []
    assert _failures(judge, x, x * 2.0 * (1 + 1e-3)) == ["wrong_output"]  # TF32-like: beyond fp32


def test_an_original_calling_convolutions_allows_tf32_error_even_where_its_own_run_is_fp32():
    """cuDNN picks its kernel by layout and shape: an NCDHW conv3d of 3 channels ran in fp32
    where the same conv channels-last ran in TF32 (level2/6 on an H100), both under the
    defaults.  The original's op list decides, not whether its own bits moved."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    judge = _Judge(problem=None, model=_Doubling(), dev=torch.device("cpu"), cases=[],
                   tf32_ops=True)
    assert _failures(judge, x, x * 2.0 * (1 + 1e-3)) == []  # TF32's error: allowed
    assert _failures(judge, x, x * 2.0 * 1.05) == ["wrong_output"]  # beyond TF32's bound
    assert _failures(judge, x, torch.zeros_like(x)) == ["wrong_output"]  # skipped work


def test_which_profiled_ops_the_defaults_may_run_in_tf32():
    from kernelstitch.agents.verifier.op_names import defaults_allow_tf32

    assert defaults_allow_tf32(["aten::relu", "aten::conv3d"])
    assert defaults_allow_tf32(["aten::cudnn_convolution_transpose"])
    assert defaults_allow_tf32(["aten::lstm"])
    assert not defaults_allow_tf32(["aten::addmm", "aten::matmul", "aten::relu_"])  # cuBLAS: fp32
    assert not defaults_allow_tf32([])


def test_cancellation_under_the_timing_settings_gets_the_second_opinion():
    class MeanOfCentred(torch.nn.Module):  # true value 0: the output is rounding noise
        def forward(self, x):
            return (x - x.mean()).mean().reshape(1)

    judge = _judge(MeanOfCentred())
    x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(1)) + 1000.0
    with torch.no_grad():
        noise = judge.model(x).abs().clamp_min(1e-6)
    # another summation order: its noise differs from the reference's by far more than the
    # bound of that noise, but it is as close to the float64 value (0) as PyTorch's own
    assert _failures(judge, x, -noise) == []
    assert _failures(judge, x, torch.full((1,), 0.5)) == ["wrong_output"]


def test_a_model_drawing_random_numbers_is_rerun_from_the_same_random_state():
    """Dropout and kin: the rerun under the timing's settings draws what the reference drew, so
    it shows the settings change nothing here and fp32's bound applies."""
    from kernelstitch.agents.verifier.reference_task import _rng_state

    judge = _judge(_Noisy())
    x = torch.randn(4096, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(3)
    rng = _rng_state(torch.device("cpu"))
    with torch.no_grad():
        reference = [judge.model(x)]

    def failures(cand, state):
        return [f.code for f in judge._compare_timing_settings(
            [x], reference, [cand], [None], _info(cand), "cpu", state)]

    assert failures(reference[0].clone(), rng) == []
    assert failures(reference[0] * (1 + 1e-3), rng) == ["wrong_output"]  # fp32's bound


class _Noisy(torch.nn.Module):  # training-mode dropout's kind: draws random numbers
    def forward(self, x):
        return x * torch.rand_like(x)


def test_a_model_drawing_random_numbers_gets_no_float64_second_opinion():
    """A float64 recomputation draws other random numbers: measured from it, the reference is
    as far off as garbage, so the second opinion would have accepted zeros for a dropout model
    (every check, not only the timing one).  It is skipped there; cancellation keeps it."""
    from kernelstitch.agents.verifier.reference_task import _rng_state

    judge = _judge(_Noisy())
    x = torch.randn(4096, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(3)
    rng = _rng_state(torch.device("cpu"))
    with torch.no_grad():
        reference = [judge.model(x)]
    reply: dict = {}
    codes = [f.code for f in judge._compare_fp32([x], reference, [torch.zeros_like(x)], [None],
                                                 _info(x), "cpu", rng, reply)]
    assert codes == ["wrong_output"] and reply.get("float64_unrelated") is True
    assert judge._compare_fp32([x], reference, [reference[0].clone()], [None], _info(x), "cpu",
                               rng, {}) == []

    centred = _judge(torch.nn.Module())
    centred.model.forward = lambda v: (v - v.mean()).mean().reshape(1)
    y = torch.randn(1 << 16, generator=torch.Generator().manual_seed(1)) + 1000.0
    rng = _rng_state(torch.device("cpu"))
    with torch.no_grad():
        ref = [centred.model(y)]
    noise = -ref[0].abs().clamp_min(1e-6)
    reply = {}
    assert centred._compare_fp32([y], ref, [noise], [None], _info(noise), "cpu", rng, reply) == []
    assert "float64_errors" in reply  # deterministic: the second opinion judged it
