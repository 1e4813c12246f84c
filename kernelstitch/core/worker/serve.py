"""The worker side: read Requests on stdin, run tasks, write Responses on the protocol channel.

Started only as `python -m kernelstitch.core.worker` by WorkerClient.  It imports nothing heavy
at start (torch is loaded by the tasks that need it), so a worker is ready in well under a
second.  Failure policy, which the client relies on:

* a task exception -> `exception`; the worker keeps serving;
* torch.OutOfMemoryError / MemoryError -> `oom`; caches are freed and the worker keeps serving;
* a sticky CUDA error (illegal address, device-side assert, ...) -> `cuda_fatal`; the worker
  replies and then exits, because every later CUDA call in this process would fail too.

With `--write-guard FOLDER` (repeatable) the worker restricts its own writes to those folders
(Landlock, `kernelstitch.core.sandbox`) as its very first step, and says in its readiness line
whether the guard is enforced.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any, BinaryIO

from kernelstitch.core.worker.protocol import (
    HELLO_ID,
    ErrorKind,
    ProtocolError,
    Request,
    Response,
    module_allowed,
    split_task,
)

DEFAULT_ALLOWED_PREFIXES = ("kernelstitch.",)
EXIT_AFTER_CUDA_FATAL = 3

# Messages of CUDA errors that leave the context unusable ("sticky" errors in the CUDA docs).
_STICKY_CUDA_MESSAGES = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "an illegal instruction was encountered",
    "misaligned address",
    "the launch timed out and was terminated",
    "hardware stack error",
    "invalid program counter",
    "uncorrectable ecc error",
    "operation not supported on global/shared address space",
    "cudaerrorillegaladdress",
    "cudaerrorlaunchfailure",
    "cuda_error_illegal_address",
    "cuda_error_launch_failed",
)
_OOM_MESSAGES = ("out of memory",)

# The protocol channel (a dup of the original stdout); set by main().
_channel: BinaryIO | None = None


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _torch_class(name: str) -> type | None:
    torch = sys.modules.get("torch")  # only if a task loaded it: never import torch here
    found = getattr(torch, name, None) if torch is not None else None
    return found if isinstance(found, type) else None


def classify(exc: BaseException) -> ErrorKind:
    chain = list(_exception_chain(exc))
    messages = [str(e).lower() for e in chain]
    if any(pattern in m for m in messages for pattern in _STICKY_CUDA_MESSAGES):
        return "cuda_fatal"
    oom_type = _torch_class("OutOfMemoryError")
    for e, message in zip(chain, messages):
        if isinstance(e, MemoryError) or (oom_type is not None and isinstance(e, oom_type)):
            return "oom"
        if any(pattern in message for pattern in _OOM_MESSAGES) and isinstance(e, RuntimeError):
            return "oom"
    accelerator_error = _torch_class("AcceleratorError")
    if accelerator_error is not None and any(isinstance(e, accelerator_error) for e in chain):
        return "cuda_fatal"  # torch raises it for CUDA errors; a fresh process is the safe bet
    return "exception"


def _message(exc: BaseException) -> str:
    from kernelstitch.core.problem import ProblemError  # light: ast and importlib only

    if isinstance(exc, ProblemError):
        return str(exc)  # already written for the user
    if isinstance(exc, SystemExit):
        return f"task called sys.exit({exc.code!r})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _free_memory() -> None:
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001, S110 - best effort; the next task reports real problems
        pass


def stack_dump_delay_s(timeout_s: float) -> float:
    """When to dump the stacks of a request given timeout_s seconds.

    The lead over the client's deadline is at least half a second (up to 5 s): the client's
    clock starts before the request reaches this process, and on a loaded machine a 10% lead
    of a 1 s deadline (CI's two cores) was killed before the dump reached the pipe.
    """
    lead = min(max(timeout_s * 0.1, 0.5), 5.0)
    return max(timeout_s - lead, timeout_s * 0.5, 0.01)


def run_request(request: Request, allowed: tuple[str, ...]) -> Response:
    start = time.perf_counter()
    try:
        module_name, function_name = split_task(request.task)
    except ValueError as exc:
        return Response.failure(request.id, "exception", str(exc))
    if not module_allowed(module_name, allowed):
        return Response.failure(
            request.id,
            "exception",
            f"task module {module_name!r} is not allowed in this worker "
            f"(allowed packages: {', '.join(allowed)}); pass allowed_prefixes to WorkerClient",
        )
    # Dump the stacks to stderr before the client's deadline, so a timeout shows where the
    # task hung.
    faulthandler.dump_traceback_later(stack_dump_delay_s(request.timeout_s), exit=False)
    try:
        module = importlib.import_module(module_name)
        function = getattr(module, function_name, None)
        if not callable(function):
            raise AttributeError(  # noqa: TRY004 - a missing name, not a wrong type
                f"module {module_name!r} has no task {function_name!r}"
            )
        result: Any = function(**request.args)
    except BaseException as exc:  # noqa: BLE001 - every failure of user code becomes a reply
        kind = classify(exc)
        response = Response.failure(
            request.id,
            kind,
            _message(exc),
            duration_s=time.perf_counter() - start,
            traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        )
        traceback.clear_frames(exc.__traceback__)
        del exc  # drop frames holding tensors before freeing caches
        if kind == "oom":
            _free_memory()
        return response
    finally:
        faulthandler.cancel_dump_traceback_later()
    return Response(id=request.id, ok=True, result=result, duration_s=time.perf_counter() - start)


def send(response: Response) -> None:
    assert _channel is not None
    try:
        line = response.to_json()
    except (TypeError, ValueError) as exc:
        line = Response.failure(
            response.id,
            "exception",
            f"task returned a value that is not JSON-serialisable ({exc}); return plain "
            "data and pass tensors as file paths",
            duration_s=response.duration_s,
        ).to_json()
    _channel.write(line.encode("utf-8") + b"\n")
    _channel.flush()


def _protect_protocol_channel() -> BinaryIO:
    """Keep the real stdout for responses; point fd 1 (print, C printf) at stderr."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb")


def _apply_memory_limit(limit_mb: int) -> None:
    import resource

    limit = limit_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _exit_when_orphaned(poll_s: float = 1.0) -> None:
    """A hung task would outlive a dead client; the client's death ends this worker too."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                if os.getpgrp() == os.getpid():  # our own session: take compilers etc. along
                    os.killpg(os.getpid(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kernelstitch.core.worker")
    parser.add_argument("--allow", action="append", default=[], help="allowed task package")
    parser.add_argument("--sys-path", action="append", default=[], help="prepended to sys.path")
    parser.add_argument("--memory-limit-mb", type=int, default=None)
    parser.add_argument("--write-guard", action="append", default=None, metavar="FOLDER",
                        help="allow writes only beneath these folders (sandbox.py)")
    parser.add_argument("--allow-tcp", action="store_true",
                        help="with --write-guard: keep TCP (denied by default)")
    return parser.parse_args(argv)


def _apply_guard(options: argparse.Namespace) -> dict[str, Any] | None:
    """The write guard and the write-attempt log, before any thread or task exists."""
    if options.write_guard is None:
        return None
    from kernelstitch.core import sandbox  # stdlib only

    sys.dont_write_bytecode = True  # a .pyc next to user code would be a write outside
    status = sandbox.apply_write_guard(options.write_guard, deny_tcp=not options.allow_tcp)
    sandbox.watch_write_attempts(status.allowed)
    return status.to_json()


def main(argv: list[str] | None = None) -> int:
    global _channel
    options = _parse_args(argv)
    guard = _apply_guard(options)  # first: Landlock binds the threads created after it
    _channel = _protect_protocol_channel()
    faulthandler.enable()  # Python stacks on stderr for SIGSEGV/SIGABRT: the client keeps a tail
    if options.memory_limit_mb:
        _apply_memory_limit(options.memory_limit_mb)
    for path in reversed(options.sys_path):
        sys.path.insert(0, path)
    allowed = DEFAULT_ALLOWED_PREFIXES + tuple(options.allow)
    _exit_when_orphaned()
    hello: dict[str, Any] = {"pid": os.getpid(), "python": sys.version}
    if guard is not None:
        hello["guard"] = guard
    send(Response(id=HELLO_ID, ok=True, result=hello))

    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0  # the client closed our stdin: a clean shutdown
        if not line.strip():
            continue
        try:
            request = Request.from_json(line)
        except ProtocolError as exc:
            send(Response.failure(-1, "protocol", f"malformed request: {exc}"))
            continue
        response = run_request(request, allowed)
        send(response)
        if response.error is not None and response.error.kind == "cuda_fatal":
            sys.stderr.flush()
            os._exit(EXIT_AFTER_CUDA_FATAL)  # skip atexit/CUDA teardown on a poisoned context
