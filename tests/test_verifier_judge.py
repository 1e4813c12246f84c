"""The memory plan and the judge's wire format and server (CPU: no CUDA IPC here; the GPU suite
runs the IPC path).  The plan decides what a multi-GB problem may hold; the judge must answer
every request, refuse malformed ones, and never unpickle what the candidate's process sends."""

from __future__ import annotations

import json
import threading
from multiprocessing.connection import Client

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.compare import HostLeaf, compare_outputs
from kernelstitch.agents.verifier.judge import (
    JudgeClient,
    JudgeServer,
    UnreadableLeaf,
    decode_leaf,
    encode_leaf,
)
from kernelstitch.agents.verifier.memory_plan import (
    MAX_POISON_BLOCKS,
    MemoryPlan,
    fits_scaled,
    plan_memory,
)

GiB = 1 << 30
H100_FREE = 78 * GiB


def test_small_problems_get_every_check_at_full_strength():
    plan = plan_memory(H100_FREE, 64 << 20, 512 << 20, 512 << 20)
    assert plan.fits and plan.full_snapshot
    assert plan.poison_blocks == MAX_POISON_BLOCKS and plan.rotated_sets == 3


def test_a_6_4_gb_elementwise_problem_fits_an_h100():
    size = 4096 * 393216 * 4  # the level-1 ReLU/GELU input and output
    plan = plan_memory(H100_FREE, 0, size, size)
    assert plan.fits and plan.needed_bytes <= H100_FREE
    assert "memory plan" in plan.summary() and "6.00 GiB" in plan.summary()


def test_larger_problems_keep_the_checks_with_fewer_extras():
    size = 12 * GiB
    plan = plan_memory(H100_FREE, 0, size, size)
    assert plan.fits and plan.needed_bytes <= H100_FREE
    assert 1 <= plan.poison_blocks < MAX_POISON_BLOCKS and plan.rotated_sets < 3


def test_a_problem_too_large_for_the_device_says_so_with_the_numbers():
    plan = plan_memory(40 * GiB, 0, 16 * GiB, 16 * GiB)
    assert not plan.fits
    message = plan.too_large_message()
    assert "too large" in message and "16.00 GiB" in message and "40.00 GiB" in message
    assert plan.needed_bytes > 40 * GiB


def test_the_plan_never_needs_more_than_it_was_given():
    for inputs, outputs in [(1 * GiB, 1 * GiB), (8 * GiB, 4 << 20), (6 * GiB, 6 * GiB),
                            (12 * GiB, 12 * GiB)]:
        plan = plan_memory(H100_FREE, 256 << 20, inputs, outputs)
        if plan.fits:
            assert plan.needed_bytes <= H100_FREE


def test_larger_shape_variants_are_left_out_when_they_no_longer_fit():
    size = 9 * GiB
    plan = plan_memory(H100_FREE, 0, size, size)
    assert plan.fits and fits_scaled(plan, 1.0)
    assert not fits_scaled(plan, 2.0)


def test_the_plan_round_trips_through_json():
    plan = plan_memory(H100_FREE, 1, 2, 3)
    assert MemoryPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_plain_values_and_host_tensors_encode_as_json():
    assert decode_leaf(encode_leaf(3), torch.device("cpu")) == 3
    assert decode_leaf(encode_leaf(object()), torch.device("cpu")).startswith("<object")
    leaf = decode_leaf(json.loads(json.dumps(encode_leaf(torch.ones(2, 3)))),
                       torch.device("cuda", 0))
    assert isinstance(leaf, HostLeaf) and leaf.shape == [2, 3] and leaf.device == "cpu"


def test_a_host_output_fails_as_a_device_mismatch_without_its_values():
    failures = compare_outputs([torch.ones(2, 3)], [HostLeaf("cpu", [2, 3], torch.float32)],
                               [], [{}], "cuda:0")
    assert [f.code for f in failures] == ["device_mismatch"]
    failures = compare_outputs([torch.ones(2, 3)], [HostLeaf("cpu", [3, 2], torch.float32)],
                               [], [{}], "cuda:0")
    assert [f.code for f in failures] == ["shape_mismatch"]


@pytest.mark.parametrize("data", [
    {"kind": "cuda", "dtype": "torch.float32", "shape": [2], "device": 0, "stride": ["x"]},
    {"kind": "cuda", "dtype": "torch.float32", "shape": [2], "device": 7, "stride": [1]},
    {"kind": "cuda", "dtype": "os.system", "shape": [2]},
    {"kind": "pickle", "dtype": "torch.float32", "shape": [2]},
])
def test_descriptions_the_judge_cannot_map_are_refused(data):
    with pytest.raises(UnreadableLeaf):
        decode_leaf(data, torch.device("cuda", 0))


def test_the_judge_server_answers_each_request_and_refuses_malformed_ones(tmp_path):
    seen = []

    def handle(request):
        seen.append(request)
        if request.get("boom"):
            raise RuntimeError("reference crashed")
        return {"failures": [], "echo": request.get("case")}

    server = JudgeServer(str(tmp_path), handle)
    client = JudgeClient(server.address)
    assert client.ask({"op": "compare", "case": "s1"}) == {"failures": [], "echo": "s1"}
    assert "reference crashed" in client.ask({"boom": True})["error"]
    client.close()
    # A second connection (the variants phase) is served too.
    again = JudgeClient(server.address)
    assert again.ask({"case": "s2"})["echo"] == "s2"
    again.close()
    # Pickled objects are not JSON: refused, never unpickled.
    raw = Client(server.address.path, family="AF_UNIX",
                 authkey=bytes.fromhex(server.address.authkey))
    raw.send(threading.Lock)  # Connection.send pickles
    reply = json.loads(raw.recv_bytes())
    assert "malformed" in reply["error"]
    raw.close()
    assert [r.get("case") for r in seen] == ["s1", None, "s2"]


def test_a_client_without_the_key_is_turned_away(tmp_path):
    from multiprocessing import AuthenticationError

    server = JudgeServer(str(tmp_path), lambda request: {"failures": []})
    with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
        Client(server.address.path, family="AF_UNIX", authkey=b"wrong" * 8)
