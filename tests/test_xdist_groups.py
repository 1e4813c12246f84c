"""`--dist loadgroup` keeps each xdist_group on one worker (tests/conftest.py relies on it for
its shared fixtures and the GPU memory lanes): under pytest 9 with pytest-xdist 3.8 it silently
did not, hence the pin in pyproject.toml."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.xdist_group("shared")
        def test_a(): pass

        @pytest.mark.xdist_group("shared")
        def test_b(): pass

        def test_c(): pass
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "-v", "test_grouped.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = {line.split("]")[0] for line in done.stdout.splitlines()
               if "PASSED" in line and "@shared" in line}
    assert len(workers) == 1, done.stdout[-2000:]  # both grouped tests, one worker


def test_memory_heavy_gpu_tests_of_one_lane_never_overlap_without_loadgroup(tmp_path):
    """`pytest -n 2` with no --dist loadgroup (the GPU image's pytest 9) spreads a lane's tests
    over workers; the lane's file lock (tests/conftest.py) still runs them one at a time."""
    from pathlib import Path

    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: gpu\n    gpu_memory: memory\n"
                                         "    nvcc: nvcc\n    slow: slow\n")
    (tmp_path / "test_lane.py").write_text(textwrap.dedent("""
        import os
        import time
        import pytest

        @pytest.mark.gpu
        @pytest.mark.gpu_memory
        @pytest.mark.parametrize("k", range(4))
        def test_heavy(k):
            log = os.environ["SPANS"]
            start = time.time()
            time.sleep(0.4)
            with open(log, "a") as f:
                f.write(f"{start} {time.time()}\\n")
    """))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": f"lane-test-{tmp_path.name}", "SPANS": str(tmp_path / "spans.txt")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "test_lane.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-2000:]
    spans = sorted(tuple(map(float, line.split())) for line in (tmp_path / "spans.txt").read_text().split("\n") if line)
    assert len(spans) == 4
    assert all(later[0] >= earlier[1] - 0.01 for earlier, later in zip(spans, spans[1:])), spans
