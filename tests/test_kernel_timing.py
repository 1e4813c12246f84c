"""bench/kernel_timing.py, the loop the kernel timing scripts share: every variant's result is
checked before it is timed, and the median and bandwidth come from the timer's samples."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from kernel_timing import timed_variants  # noqa: E402


class _Timer:
    """The CudaTimer interface with fixed samples: ms per call, the arguments recorded."""

    def __init__(self, samples):
        self.samples, self.calls = samples, []

    def samples_ms(self, fn, *args, runs):
        self.calls.append((fn, args, runs))
        return self.samples


def test_each_variant_is_checked_then_timed_as_a_median_and_a_bandwidth():
    checked = []
    timer = _Timer([3.0, 1.0, 2.0])
    rows = timed_variants(timer, {"a": lambda x: x + 1, "b": lambda x: x * 2},
                          lambda name, got: checked.append((name, got)), 4_000_000_000, 7, 10)
    assert checked == [("a", 11), ("b", 20)]
    assert rows == {"a": {"ms": 2.0, "tb_per_s": 2.0}, "b": {"ms": 2.0, "tb_per_s": 2.0}}
    assert [(args, runs) for _, args, runs in timer.calls] == [((10,), 7), ((10,), 7)]


def test_a_wrong_result_stops_before_any_timing():
    timer = _Timer([1.0])

    def check(name, got):
        if got != 0:
            raise SystemExit(f"{name} differs")

    with pytest.raises(SystemExit, match="bad differs"):
        timed_variants(timer, {"bad": lambda: 1}, check, 1, 3)
    assert timer.calls == []


def test_results_are_saved_with_the_device_only_where_asked(tmp_path):
    import json

    from kernel_timing import save

    save(None, "GPU", [{"a": 1}])  # no file asked for: nothing written, no error
    save(tmp_path / "r.json", "GPU", [{"a": 1}], baseline="HEAD")
    assert json.loads((tmp_path / "r.json").read_text()) == {"device": "GPU", "baseline": "HEAD", "results": [{"a": 1}]}
