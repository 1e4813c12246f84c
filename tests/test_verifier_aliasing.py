"""Storage-overlap helpers the reference and candidate tasks share (aliasing and output-reuse
checks), on CPU tensors: they compare storages, not devices."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.gpu_common import ranges_overlap, storage_ranges
from kernelstitch.agents.verifier.reference_task import _aliases


def test_views_share_their_base_storage_and_fresh_tensors_do_not():
    x = torch.zeros(16)
    view, fresh = x[4:8], torch.zeros(16)
    assert ranges_overlap(storage_ranges([view]), storage_ranges([x]))
    assert not ranges_overlap(storage_ranges([fresh]), storage_ranges([x]))
    assert storage_ranges([torch.zeros(0), 3, None]) == []  # empty tensors and non-tensors skipped
    assert _aliases([x.view(4, 4)], [x])
    assert not _aliases([fresh], [x])
