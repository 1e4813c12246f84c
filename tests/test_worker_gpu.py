"""The worker on a real GPU: poisoned CUDA contexts are replaced, OOM is survivable."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelstitch.core.worker.client import WorkerClient

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

TESTS_DIR = str(Path(__file__).parent)
TASKS = "worker_tasks.gpu"


@pytest.fixture
def client():
    with WorkerClient(allowed_prefixes=("worker_tasks.",), extra_sys_path=(TESTS_DIR,),
                      cuda_device=0) as c:
        yield c


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in state


def healthy_sum(client: WorkerClient) -> dict:
    response = client.call(f"{TASKS}:cuda_sum", {"n": 1000}, timeout_s=120)
    assert response.ok, response.error
    assert response.result["sum"] == 1000.0
    return response.result


@pytest.mark.parametrize(
    ("task", "message"),
    [("illegal_memory_access", "illegal memory access"),
     ("device_side_assert", "device-side assert")],
)
def test_sticky_cuda_error_is_fatal_and_the_next_worker_is_fresh(client, task, message):
    old_pid = healthy_sum(client)["pid"]
    response = client.call(f"{TASKS}:{task}", timeout_s=120)
    assert not response.ok
    assert response.error.kind == "cuda_fatal", response.error
    assert message in response.error.message
    assert process_gone(old_pid)  # never reused
    after = healthy_sum(client)
    assert after["pid"] != old_pid
    assert client.restarts == 1


def test_cuda_oom_is_reported_and_the_worker_keeps_serving(client):
    old_pid = healthy_sum(client)["pid"]
    response = client.call(f"{TASKS}:cuda_oom", timeout_s=120)
    assert response.error.kind == "oom", response.error
    assert "out of memory" in response.error.message.lower()
    assert healthy_sum(client)["pid"] == old_pid
    assert client.restarts == 0


def test_ping_sees_the_selected_gpu(client):
    response = client.call("ping", timeout_s=120)
    assert response.ok, response.error
    assert response.result["cuda_available"] is True
    assert response.result["cuda_visible_devices"] == "0"
    assert response.result["device_name"]
