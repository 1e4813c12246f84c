"""The worker process and its client, on the CPU: every failure becomes a typed Response."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kernelstitch.core.worker.client import WorkerClient
from kernelstitch.core.worker.protocol import (
    ProtocolError,
    Request,
    Response,
    WorkerError,
    module_allowed,
    split_task,
)
from kernelstitch.core.worker.serve import classify

TESTS_DIR = str(Path(__file__).parent)
TASKS = "worker_tasks.basic"


def make_client(**kwargs) -> WorkerClient:
    kwargs.setdefault("allowed_prefixes", ("worker_tasks.",))
    kwargs.setdefault("extra_sys_path", (TESTS_DIR,))
    return WorkerClient(**kwargs)


@pytest.fixture
def client():
    with make_client() as c:
        yield c


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in state  # a zombie nobody reaped (container init) is dead too


def assert_recovers(client: WorkerClient, old_pid: int) -> None:
    """The next call runs on a fresh worker and works."""
    response = client.call(f"{TASKS}:echo", {"value": 7}, timeout_s=30)
    assert response.ok, response.error
    assert response.result["value"] == 7
    assert response.result["pid"] != old_pid
    assert process_gone(old_pid)


# ------------------------------------------------------------------------------------------
# protocol


def test_protocol_round_trip():
    request = Request(id=3, task="a.b:c", args={"x": [1, 2], "y": {"z": None}}, timeout_s=2.5)
    assert Request.from_json(request.to_json()) == request
    error = WorkerError(kind="crash", message="died", exit_code=-11, signal_name="SIGSEGV",
                        stderr_tail="tail")
    response = Response(id=3, ok=False, error=error, duration_s=0.5)
    assert Response.from_json(response.to_json()) == response
    assert "\n" not in Response(id=1, ok=True, result="a\nb").to_json()


@pytest.mark.parametrize(
    "line",
    ["not json", "[1, 2]", '{"id": "1", "ok": true}', '{"id": 1, "ok": false}',
     '{"id": 1, "ok": false, "error": {"kind": "weird", "message": "m"}}'],
)
def test_protocol_rejects_bad_responses(line):
    with pytest.raises(ProtocolError):
        Response.from_json(line)


def test_task_names_and_prefixes():
    assert split_task("ping") == ("kernelstitch.core.worker.builtin_tasks", "ping")
    assert split_task("pkg.mod:fn") == ("pkg.mod", "fn")
    with pytest.raises(ValueError):
        split_task("pkg.mod:")
    assert module_allowed("kernelstitch.core.problem", ("kernelstitch.",))
    assert module_allowed("kernelstitch", ("kernelstitch.",))
    assert not module_allowed("kernelstitch_evil.x", ("kernelstitch.",))
    assert not module_allowed("os", ("kernelstitch.",))


def test_classify_cuda_and_memory_errors():
    assert classify(ValueError("x")) == "exception"
    assert classify(MemoryError()) == "oom"
    fatal = RuntimeError("CUDA error: an illegal memory access was encountered")
    assert classify(fatal) == "cuda_fatal"
    try:  # a wrapped sticky error is still sticky
        try:
            raise RuntimeError("CUDA error: device-side assert triggered")
        except RuntimeError as inner:
            raise ValueError("verification failed") from inner
    except ValueError as outer:
        assert classify(outer) == "cuda_fatal"


# ------------------------------------------------------------------------------------------
# normal service


def test_round_trip_runs_in_another_process(client):
    payload = {"list": [1, 2.5, "three"], "nested": {"none": None, "flag": True}}
    response = client.call(f"{TASKS}:echo", {"value": payload})
    assert response.ok, response.error
    assert response.result["value"] == payload
    assert response.result["pid"] == client.pid != os.getpid()
    assert response.duration_s >= 0


def test_ping_reports_the_worker_and_loads_torch_lazily(client):
    import torch

    response = client.call("ping", timeout_s=120)
    assert response.ok, response.error
    assert response.result["pid"] == client.pid
    assert response.result["torch"] == torch.__version__
    assert response.result["cuda_available"] == torch.cuda.is_available()


def test_sleep_builtin(client):
    response = client.call("sleep", {"seconds": 0.05})
    assert response.ok and response.result == 0.05


def test_exception_keeps_the_worker(client):
    first = client.call(f"{TASKS}:pid")
    response = client.call(f"{TASKS}:boom", {"message": "bad input"})
    assert not response.ok
    assert response.error.kind == "exception"
    assert response.error.message == "ValueError: bad input"
    assert "in boom" in response.error.traceback
    assert client.call(f"{TASKS}:pid").result == first.result
    assert client.restarts == 0


def test_sys_exit_is_an_exception_not_a_death(client):
    first = client.call(f"{TASKS}:pid").result
    response = client.call(f"{TASKS}:exit_with", {"code": 3})
    assert response.error.kind == "exception"
    assert "sys.exit(3)" in response.error.message
    assert client.call(f"{TASKS}:pid").result == first


def test_unserialisable_result_is_reported(client):
    response = client.call(f"{TASKS}:unserialisable")
    assert response.error.kind == "exception"
    assert "JSON" in response.error.message
    assert client.call(f"{TASKS}:echo", {"value": 1}).ok


def test_prints_never_corrupt_the_protocol():
    lines: list[str] = []
    with make_client(stderr_callback=lines.append) as client:
        response = client.call(f"{TASKS}:chatty", {"lines": 200})
        assert response.ok, response.error
        assert response.result == "still clean"
        assert client.call(f"{TASKS}:echo", {"value": 2}).result["value"] == 2
        deadline = time.monotonic() + 5
        while "C printf line" not in lines and time.monotonic() < deadline:
            time.sleep(0.02)  # forwarded from the drain thread
    assert "print line 0" in lines and "print line 199" in lines
    assert "raw fd 1 write" in lines and "C printf line" in lines


def test_huge_stderr_does_not_block(client):
    response = client.call(f"{TASKS}:flood_stderr", {"megabytes": 16}, timeout_s=30)
    assert response.ok, response.error
    assert response.result == 16


# ------------------------------------------------------------------------------------------
# failures that cost the worker


@pytest.mark.parametrize("task", ["spin_forever", "sleep_forever"])
def test_timeout_kills_and_restarts(client, task):
    old = client.call(f"{TASKS}:pid").result
    started = time.monotonic()
    response = client.call(f"{TASKS}:{task}", timeout_s=1.0)
    assert time.monotonic() - started < 5
    assert response.error.kind == "timeout"
    assert "1 s" in response.error.message
    # The worker dumps its stacks just before the deadline: the tail shows where it hung.
    assert task in response.error.stderr_tail
    assert_recovers(client, old)
    assert client.restarts == 1


@pytest.mark.parametrize("timeout_s", [0.02, 1.0, 10.0, 60.0, 600.0])
def test_the_stack_dump_comes_well_before_the_deadline(timeout_s):
    from kernelstitch.core.worker.serve import stack_dump_delay_s

    delay = stack_dump_delay_s(timeout_s)
    assert 0 < delay < timeout_s
    # at least half a second of lead where the deadline allows it, never more than 5 s
    assert timeout_s - delay >= min(0.5, timeout_s / 2) - 1e-9
    assert timeout_s - delay <= max(5.0, timeout_s / 2) + 1e-9


@pytest.mark.parametrize(
    ("task", "signal_name", "stderr_text"),
    [("abort", "SIGABRT", "Fatal Python error: Aborted"),
     ("segfault", "SIGSEGV", "Segmentation fault")],
)
def test_crash_reports_signal_and_stderr(client, task, signal_name, stderr_text):
    old = client.call(f"{TASKS}:pid").result
    response = client.call(f"{TASKS}:{task}", timeout_s=30)
    assert response.error.kind == "crash"
    assert response.error.signal_name == signal_name
    assert response.error.exit_code == -getattr(signal, signal_name)
    assert stderr_text in response.error.stderr_tail
    assert signal_name in response.error.message
    assert_recovers(client, old)


def test_hard_exit_reports_the_exit_code(client):
    old = client.call(f"{TASKS}:pid").result
    response = client.call(f"{TASKS}:hard_exit", {"code": 5})
    assert response.error.kind == "crash"
    assert response.error.exit_code == 5 and response.error.signal_name is None
    assert_recovers(client, old)


def test_garbage_on_the_channel_is_a_protocol_error(client):
    old = client.call(f"{TASKS}:pid").result
    response = client.call(f"{TASKS}:corrupt_protocol")
    assert response.error.kind == "protocol"
    assert "not json" in response.error.message
    assert_recovers(client, old)


def test_cancel_while_waiting(client):
    old = client.call(f"{TASKS}:pid").result
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    response = client.call(f"{TASKS}:sleep_forever", timeout_s=60, cancel=cancel)
    assert time.monotonic() - started < 5
    assert response.error.kind == "cancelled"
    assert_recovers(client, old)


def test_cancel_before_start_runs_nothing(client):
    cancel = threading.Event()
    cancel.set()
    response = client.call(f"{TASKS}:echo", {"value": 1}, cancel=cancel)
    assert response.error.kind == "cancelled"
    assert client.pid is None  # no worker was even started


def test_close_from_another_thread_stops_a_running_call():
    client = make_client()
    old = client.call(f"{TASKS}:pid").result
    threading.Timer(0.3, client.close).start()
    response = client.call(f"{TASKS}:sleep_forever", timeout_s=60)
    assert response.error.kind == "cancelled"
    assert process_gone(old)
    with pytest.raises(RuntimeError, match="closed"):
        client.call(f"{TASKS}:pid")


def test_close_ends_the_worker():
    with make_client() as client:
        pid = client.call(f"{TASKS}:pid").result
    assert process_gone(pid)


# ------------------------------------------------------------------------------------------
# confinement and configuration


@pytest.mark.parametrize("task", [f"{TASKS}:echo", "os:getcwd", "subprocess:run"])
def test_disallowed_task_modules_are_rejected(task):
    with WorkerClient() as client:  # no test prefix
        response = client.call(task, {"value": 1})
    assert response.error.kind == "exception"
    assert "not allowed" in response.error.message


def test_unknown_task_function(client):
    response = client.call(f"{TASKS}:no_such_task")
    assert response.error.kind == "exception"
    assert "no_such_task" in response.error.message


def test_environment_and_cuda_device():
    with make_client(env={"KS_WORKER_TEST": "yes"}, cuda_device=3) as client:
        assert client.call(f"{TASKS}:worker_env", {"name": "KS_WORKER_TEST"}).result == "yes"
        visible = client.call(f"{TASKS}:worker_env", {"name": "CUDA_VISIBLE_DEVICES"})
        assert visible.result == "3"
        assert client.call(f"{TASKS}:sys_path_head").result[0] == TESTS_DIR


def test_memory_limit_gives_oom_and_the_worker_survives():
    with make_client(memory_limit_mb=400) as client:
        old = client.call(f"{TASKS}:pid").result
        response = client.call(f"{TASKS}:allocate", {"megabytes": 2048})
        assert response.error.kind == "oom"
        assert client.call(f"{TASKS}:allocate", {"megabytes": 16}).result == 16 * 1024 * 1024
        assert client.call(f"{TASKS}:pid").result == old


def test_startup_failures_are_responses(tmp_path):
    # A worker that cannot be ready in time: its sitecustomize sleeps well past the limit.
    # (A 1 ms limit alone was flaky on a loaded 2-core CI: the queue wait returned the hello
    # once the starved reader thread ran.)
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(5)\n")
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    with make_client(startup_timeout_s=0.5, env={"PYTHONPATH": pythonpath}) as client:
        response = client.call(f"{TASKS}:pid")
    assert response.error.kind == "startup"
    assert "not ready" in response.error.message
    with make_client(memory_limit_mb=1) as client:  # the interpreter cannot even start
        response = client.call(f"{TASKS}:pid")
    assert response.error.kind == "startup"


def test_stdout_noise_before_ready_is_not_an_answer(tmp_path):
    """A sitecustomize printing on stdout runs before the worker protects its channel."""
    (tmp_path / "sitecustomize.py").write_text("print('hello from sitecustomize')\n")
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    with make_client(env={"PYTHONPATH": pythonpath}) as client:
        response = client.call(f"{TASKS}:echo", {"value": "fine"})
    assert response.ok, response.error
    assert response.result["value"] == "fine"


def test_orphaned_worker_exits(tmp_path):
    """A worker whose client process died (SIGKILL, no cleanup) does not live on."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {TESTS_DIR!r})
        from kernelstitch.core.worker.client import WorkerClient
        client = WorkerClient(allowed_prefixes=("worker_tasks.",), extra_sys_path=({TESTS_DIR!r},))
        print(client.call("{TASKS}:pid").result, flush=True)
        client.call("{TASKS}:sleep_forever", timeout_s=600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker_pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while not process_gone(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_gone(worker_pid)


# ------------------------------------------------------------------------------------------
# describe_problem


@pytest.fixture(scope="module")
def torch_client():
    with WorkerClient() as c:  # describe_problem is a built-in task: no extra prefix needed
        yield c


def describe(client: WorkerClient, path: Path, module: str | None = None) -> Response:
    return client.call("describe_problem", {"path": str(path), "module": module}, timeout_s=120)


def test_describe_problem(torch_client, tmp_path):
    problem = tmp_path / "linear_relu.py"
    problem.write_text(textwrap.dedent(
        """
        import torch
        from torch import nn

        class Model(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.fc = nn.Linear(n_in, n_out)
                self.register_buffer("scale", torch.ones(n_out, dtype=torch.float16))

            def forward(self, x, k):
                return torch.relu(self.fc(x)) * k

        def get_inputs():
            return [torch.randn(2, 4), 3]

        def get_init_inputs():
            return [4, 8]
        """
    ))
    response = describe(torch_client, problem)
    assert response.ok, response.error
    result = response.result
    assert result["module"] == "Model"
    assert result["parameters"] == [
        {"name": "fc.weight", "shape": [8, 4], "dtype": "float32"},
        {"name": "fc.bias", "shape": [8], "dtype": "float32"},
    ]
    assert result["buffers"] == [{"name": "scale", "shape": [8], "dtype": "float16"}]
    assert result["inputs"][0] == {"kind": "tensor", "shape": [2, 4], "dtype": "float32"}
    assert result["inputs"][1] == {"kind": "value", "type": "int", "value": 3}


def test_describe_problem_syntax_error(torch_client, tmp_path):
    problem = tmp_path / "broken.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module)\n    pass\n")
    response = describe(torch_client, problem)
    assert response.error.kind == "exception"
    assert "syntax error" in response.error.message and ":2" in response.error.message


def test_describe_problem_init_raises(torch_client, tmp_path):
    problem = tmp_path / "raises.py"
    problem.write_text(textwrap.dedent(
        """
        import torch

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                raise RuntimeError("no weights for you")

        def get_inputs():
            return [torch.randn(2)]
        """
    ))
    response = describe(torch_client, problem)
    assert response.error.kind == "exception"
    assert "no weights for you" in response.error.message
    assert response.error.message.startswith("Model(")  # the ProblemError text, verbatim


def test_describe_problem_without_inputs_says_how_to_add_them(torch_client, tmp_path):
    problem = tmp_path / "no_inputs.py"
    problem.write_text(textwrap.dedent(
        """
        import torch

        class Scale(torch.nn.Module):
            def forward(self, x):
                return x * 2
        """
    ))
    response = describe(torch_client, problem)
    assert response.error.kind == "exception"
    assert "get_inputs_Scale" in response.error.message
    assert torch_client.call("describe_problem", {"path": str(tmp_path / "missing.py")}).error


def test_describe_problem_names_a_module(torch_client, tmp_path):
    problem = tmp_path / "two.py"
    problem.write_text(textwrap.dedent(
        """
        import torch

        class A(torch.nn.Module):
            def forward(self, x):
                return x

        class B(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(n, n))

            def forward(self, x):
                return x @ self.w

        def get_inputs_B():
            return [torch.randn(3, 5)]

        def get_init_inputs_B():
            return [5]
        """
    ))
    response = describe(torch_client, problem, "B")
    assert response.ok, response.error
    assert response.result["parameters"] == [{"name": "w", "shape": [5, 5], "dtype": "float32"}]
