"""`--dist loadgroup` keeps each xdist_group on one worker (tests/conftest.py relies on it for
its shared fixtures and the GPU memory lanes): under pytest 9 with pytest-xdist 3.8 it silently
did not, hence the pin in pyproject.toml."""

from __future__ import annotations

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
