"""Suite-wide settings.  KERNELSTITCH_CPU_NVCC=0: without a GPU the pipeline compiles the
built-in kernels with nvcc (agents/cpu_compile.py); every CPU test that generates would spend
minutes in ptxas, so only tests/test_cpu_compile.py turns it back on (the env reaches the CLI
and job subprocesses the tests start).  KERNELSTITCH_CACHE_DIR: the servers the tests start keep
their cached `initialize` answers (server/early_initialize.py) in a folder of this run, not in
the user's ~/.cache."""

import atexit
import os
import shutil
import tempfile
import zlib

import pytest

os.environ.setdefault("KERNELSTITCH_CPU_NVCC", "0")
if "KERNELSTITCH_CACHE_DIR" not in os.environ:  # xdist workers inherit the controller's folder
    os.environ["KERNELSTITCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelstitch-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KERNELSTITCH_CACHE_DIR"], True)


# ---- scheduling on few cores (issue 27: `make test` on 2 cores) --------------------------------
# `make test` runs pytest-xdist with --dist loadgroup.  Two things keep the two workers busy to
# the end instead of one worker finishing minutes after the other:
# - the long tests are collected first (xdist hands work out in collection order): the nvcc
#   compiles (minutes of ptxas), then the modules that start real pipelines, CLIs and servers
#   (tens of seconds a test, mostly torch imports in subprocesses), then the rest;
# - the modules whose module-scoped fixtures are expensive run on one worker (xdist_group), so
#   the fixture is built once, not once per worker.
SLOW_MODULES = {  # tests of tens of seconds on the 2-core VM (durations of 2026-11-26)
    "test_llm_pipeline", "test_server_lsp", "test_bench_e2e", "test_llm_secrets", "test_verifier_protect",
    "test_llm_allowance", "test_pipeline_job", "test_server_real_job", "test_cpu_compile", "test_server_robust",
    "test_bench_coverage", "test_llm_bounds", "test_constants_inplace", "test_layers", "test_server_malformed",
    "test_server_fuzz", "test_verifier_static", "test_bench_run",
}
# Two lanes for whole KernelBench problems (~16 GB each); the 6 GiB verifier tests, whose memory
# plan needs 31.25 GiB at once, all share lane 0: two of them side by side ran out of memory with
# three lanes and with two (4 x H100, 2026-11-27, eleventh session call C, twelfth session call B).
KERNELBENCH_GPU_LANES = 2
GROUPED_MODULES = {  # an expensive module-scoped fixture: built once
    "test_coder", "test_verifier_binding", "test_bench_coverage", "test_llm_allowance", "test_search",
    "test_reduction_knobs", "test_llm_agents", "test_compile_cache", "test_worker",
}


def _rank(item) -> int:
    if item.get_closest_marker("nvcc"):
        return 0
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    return 1 if item.get_closest_marker("slow") or module in SLOW_MODULES else 2


def memory_lane(item) -> int | None:
    """The GPU-memory lane of a test that holds tens of GB (None: any other test).  Whole
    KernelBench problems hold up to ~16 GB of GPU memory each (4 GB tensors, the reference's and
    the candidate's outputs, torch.compile), the 6 GiB verifier tests ~31 GB, one at a time: at
    most KERNELBENCH_GPU_LANES of them at once (16 workers on one H100 ran out of memory with 4
    lanes and the 6 GiB tests outside)."""
    if not item.get_closest_marker("gpu") or not (
            "kernelbench" in item.name or item.get_closest_marker("gpu_memory")):
        return None
    return 0 if item.get_closest_marker("gpu_memory") else zlib.crc32(item.nodeid.encode()) % KERNELBENCH_GPU_LANES


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks added here
def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: collection order within a rank
    for item in items:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        if module in GROUPED_MODULES:
            item.add_marker(pytest.mark.xdist_group(module))
        elif (lane := memory_lane(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(f"kernelbench_gpu_{lane}"))


# ---- one memory-heavy GPU test a lane, whatever the scheduler ----------------------------------
# The xdist groups above hold only under --dist loadgroup; `pytest -n 6` alone (the GPU image's
# pytest 9 with its xdist) ran two 6 GiB verifier tests side by side and both ran out of memory
# (2026-11-27, fifteenth session, call 2).  A lane is also a file lock, per visible GPU set, held
# for the test's setup, call and teardown: a second worker waits for it.
def lane_lock_path(lane: int) -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "none"
    return os.path.join(tempfile.gettempdir(), f"kernelstitch-gpu-lane-{visible}-{lane}.lock")


_HELD_LANES: dict[str, object] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    lane = memory_lane(item)
    if lane is None or os.name != "posix":
        return
    import fcntl

    handle = open(lane_lock_path(lane), "a")  # noqa: SIM115 - held until the test's teardown
    fcntl.flock(handle, fcntl.LOCK_EX)
    _HELD_LANES[item.nodeid] = handle


# ---- GPU memory between tests ------------------------------------------------------------------
# Each xdist worker's caching allocator keeps what its tests freed reserved on the GPU, where the
# 6 GiB verifier tests' judge processes (31 GiB at once) need it: one ran out of memory with 9.95
# GiB free beside five such workers (2026-11-27, twelfth session, call C).  After every GPU test
# the worker hands its cached blocks back.
@pytest.hookimpl(trylast=True)  # after the fixtures' teardown: the lane is free only then
def pytest_runtest_teardown(item, nextitem):
    import sys

    torch = sys.modules.get("torch")  # never imports torch for a test that did not
    if (item.get_closest_marker("gpu") and torch is not None and torch.cuda.is_available()
            and torch.cuda.is_initialized()):
        torch.cuda.empty_cache()
    handle = _HELD_LANES.pop(item.nodeid, None)
    if handle is not None:
        handle.close()  # releases the lane's lock
