"""WorkerClient: run tasks in a separate, disposable Python process.

User code and generated code never run in the caller's process.  `call` never raises for a
failure on the worker's side: an exception, a hang, a segfault, a poisoned CUDA context, an OOM
or garbage on the pipe all come back as a `Response` with a typed `WorkerError`, and the next
call gets a fresh worker where the old one cannot be trusted any more.

Design notes:
* a fresh interpreter (`subprocess.Popen`, never fork: forking a CUDA-initialised parent breaks
  CUDA in the child), in its own session so a kill takes the worker's compilers and other
  children along (`os.killpg`);
* the worker's stderr is drained continuously into a bounded ring buffer, so a chatty kernel
  never blocks on a full pipe, and the tail explains crashes;
* one request in flight per worker (a lock); use several clients for parallel work.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from kernelstitch.core.worker.protocol import (
    HELLO_ID,
    ErrorKind,
    ProtocolError,
    Request,
    Response,
)

STDERR_KEEP_BYTES = 64 * 1024  # ring buffer size
STDERR_TAIL_BYTES = 4 * 1024  # what a failed Response carries
_POLL_S = 0.02  # how often a waiting call looks at its cancel event
_REAP_WAIT_S = 2.0


class _TailBuffer:
    """The last `limit` bytes written to a stream, thread-safe."""

    def __init__(self, limit: int = STDERR_KEEP_BYTES) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self._lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size > self._limit and len(self._chunks) > 1:
                self._size -= len(self._chunks.popleft())

    def tail(self, size: int = STDERR_TAIL_BYTES) -> str:
        with self._lock:
            data = b"".join(self._chunks)
        return data[-size:].decode("utf-8", errors="replace")


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's whole process group, then reap it.

    The group is killed before the leader is reaped: a zombie keeps its pid (= the group id)
    reserved, so the kill can never hit an unrelated process that reused the number.
    """
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=_REAP_WAIT_S)
    except subprocess.TimeoutExpired:  # unkillable (D state): leave it to the OS
        pass


class _Timeout(Exception):
    pass


class _Cancelled(Exception):
    pass


class _WorkerProcess:
    """One worker interpreter with its reader threads; disposable."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        stderr_callback: Callable[[str], None] | None,
        cwd: str | None = None,
    ) -> None:
        self.stderr = _TailBuffer()
        self._stderr_callback = stderr_callback
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
        self._finalizer = weakref.finalize(self, _kill_group, self.proc)
        self._stdout_thread = threading.Thread(
            target=self._read_stdout, name=f"worker-{self.proc.pid}-stdout", daemon=True
        )
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name=f"worker-{self.proc.pid}-stderr", daemon=True
        )
        self._stdout_thread.start()
        self._stderr_thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in iter(self.proc.stdout.readline, b""):
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)  # EOF: the worker is gone

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        partial = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.stderr.append(chunk)
            if self._stderr_callback is not None:
                partial = self._forward_lines(partial + chunk)
        if partial and self._stderr_callback is not None:
            self._forward(partial)

    def _forward_lines(self, data: bytes) -> bytes:
        *lines, partial = data.split(b"\n")
        for line in lines:
            self._forward(line)
        if len(partial) > STDERR_KEEP_BYTES:  # a newline-free flood: forward it anyway
            self._forward(partial)
            return b""
        return partial

    def _forward(self, line: bytes) -> None:
        try:
            self._stderr_callback(line.decode("utf-8", errors="replace"))  # type: ignore[misc]
        except Exception:  # noqa: BLE001, S110 - a broken log sink must not stop the drain
            pass  # (a stopped drain would block the worker on a full pipe)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def next_line(self, deadline: float, cancel: threading.Event | None) -> bytes | None:
        """The next protocol line, None at EOF; raises _Timeout or _Cancelled."""
        while True:
            if cancel is not None and cancel.is_set():
                raise _Cancelled()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Timeout()
            try:
                return self._lines.get(timeout=min(remaining, _POLL_S))
            except queue.Empty:
                continue

    def kill(self) -> None:
        """Kill the process group, reap it and let the reader threads reach EOF."""
        _kill_group(self.proc)
        self._stdout_thread.join(timeout=_REAP_WAIT_S)
        self._stderr_thread.join(timeout=_REAP_WAIT_S)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._finalizer.detach()

    def shutdown(self, grace_s: float = 2.0) -> None:
        """Ask an idle worker to exit (EOF on stdin), then make sure the group is gone."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        self._wait_exit_unreaped(grace_s)
        self.kill()

    def _wait_exit_unreaped(self, timeout_s: float) -> None:
        # waitid(WNOWAIT) leaves the zombie in place so that kill() can still target its group.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is not None:
                return
            time.sleep(0.01)

    def exit_details(self) -> dict[str, Any]:
        """After kill(): exit code, signal name and the stderr tail."""
        code = self.proc.returncode
        return {
            "exit_code": code,
            "signal_name": _signal_name(code),
            "stderr_tail": self.stderr.tail(),
        }


class WorkerClient:
    """Runs `"package.module:function"` tasks in a worker process; see the module docstring.

    env: extra environment variables for the worker (merged over os.environ).
    cuda_device: exported as CUDA_VISIBLE_DEVICES, so the worker sees that GPU as cuda:0.
    allowed_prefixes: task packages allowed besides "kernelstitch." (e.g. a test package).
    extra_sys_path: folders put first on the worker's sys.path.
    memory_limit_mb: an address-space cap (RLIMIT_AS) for CPU-only workers.  It is applied
        only when cuda_device is None, because CUDA reserves huge virtual address ranges that
        any address-space cap would break; a capped worker also gets CUDA_VISIBLE_DEVICES=""
        so it fails cleanly ("no CUDA") instead of oddly if a task tries the GPU.
    stderr_callback: receives the worker's stderr line by line (for logs), from a thread.
    write_guard: folders the worker may write beneath; it applies the guard (Landlock) before
        it runs anything and reports in its readiness line whether the kernel enforces it
        (`guard`).  None: no guard.  TCP is denied with it unless `allow_tcp`.
    scrub_env: drop credentials from the inherited environment (`sandbox.scrub_env`: secret-like
        names, key-like values, and `secret_env_names`); variables given in `env` are kept.
    cwd: the worker's working folder (None: the caller's).
    """

    def __init__(
        self,
        env: dict[str, str] | None = None,
        cuda_device: int | None = None,
        allowed_prefixes: tuple[str, ...] = (),
        extra_sys_path: tuple[str, ...] = (),
        memory_limit_mb: int | None = None,
        startup_timeout_s: float = 60,
        stderr_callback: Callable[[str], None] | None = None,
        write_guard: tuple[str, ...] | None = None,
        allow_tcp: bool = False,
        scrub_env: bool = False,
        secret_env_names: tuple[str, ...] = (),
        cwd: str | None = None,
    ) -> None:
        self._env = dict(env or {})
        self._write_guard = tuple(str(p) for p in write_guard) if write_guard is not None \
            else None
        self._allow_tcp = allow_tcp
        self._scrub_env = scrub_env
        self._secret_env_names = tuple(secret_env_names)
        self._cwd = cwd
        # The readiness line of the latest worker (its pid, and its `guard` when one was asked).
        self.hello: dict[str, Any] | None = None
        self.scrubbed_env_names: list[str] = []
        self._cuda_device = cuda_device
        self._allowed_prefixes = tuple(allowed_prefixes)
        self._extra_sys_path = tuple(str(p) for p in extra_sys_path)
        self._memory_limit_mb = memory_limit_mb
        self._startup_timeout_s = startup_timeout_s
        self._stderr_callback = stderr_callback
        self._lock = threading.Lock()
        self._worker: _WorkerProcess | None = None
        self._started = 0
        self._next_id = HELLO_ID
        self._closed = False

    # ---------------------------------------------------------------------------------------
    # public API

    @property
    def pid(self) -> int | None:
        """Pid of the current worker, None before the first call or after a failure."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive() else None

    @property
    def restarts(self) -> int:
        """How many workers were started after the first one."""
        return max(self._started - 1, 0)

    def start(self) -> Response:
        """Start the worker now (else the first call does); returns the readiness Response."""
        with self._lock:
            self._check_open()
            started = self._ensure_worker(None, time.monotonic())
            if isinstance(started, Response):
                return started
            return Response(id=HELLO_ID, ok=True, result={"pid": started.pid})

    def call(
        self,
        task: str,
        args: dict[str, Any] | None = None,
        timeout_s: float = 60.0,
        cancel: threading.Event | None = None,
    ) -> Response:
        """Run `task(**args)` in the worker; every worker-side failure is a Response."""
        if timeout_s is None or timeout_s <= 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        with self._lock:
            self._check_open()
            self._next_id += 1
            request = Request(id=self._next_id, task=task, args=dict(args or {}),
                              timeout_s=float(timeout_s))
            try:
                line = request.to_json()
            except (TypeError, ValueError) as exc:
                raise TypeError(f"arguments of {task} are not JSON-serialisable: {exc}") from exc
            start = time.monotonic()
            if cancel is not None and cancel.is_set():
                return self._failure(request, "cancelled", "cancelled before it started", start)
            started = self._ensure_worker(cancel, start)
            if isinstance(started, Response):
                return Response(id=request.id, ok=False, error=started.error,
                                duration_s=time.monotonic() - start)
            return self._exchange(started, request, line, start, cancel)

    def close(self) -> None:
        """Stop the worker.  From another thread while a call runs: kills it (-> cancelled)."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                worker, self._worker = self._worker, None
                if worker is not None:
                    worker.shutdown()
            finally:
                self._lock.release()
        else:
            worker = self._worker
            if worker is not None:
                _kill_group(worker.proc)

    def __enter__(self) -> WorkerClient:  # noqa: PYI034 - py3.10 has no typing.Self
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------
    # internals (called with the lock held)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this WorkerClient is closed; create a new one")

    def _argv(self) -> list[str]:
        argv = [sys.executable, "-m", "kernelstitch.core.worker"]
        for prefix in self._allowed_prefixes:
            argv += ["--allow", prefix]
        for path in self._extra_sys_path:
            argv += ["--sys-path", path]
        if self._memory_limit_mb is not None and self._cuda_device is None:
            argv += ["--memory-limit-mb", str(int(self._memory_limit_mb))]
        for folder in self._write_guard or ():
            argv += ["--write-guard", folder]
        if self._write_guard is not None and self._allow_tcp:
            argv.append("--allow-tcp")
        return argv

    def _worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self._scrub_env:
            from kernelstitch.core.sandbox import scrub_env

            env, self.scrubbed_env_names = scrub_env(env, self._secret_env_names)
        env.update(self._env)
        if self._cuda_device is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self._cuda_device)
        elif self._memory_limit_mb is not None:
            env["CUDA_VISIBLE_DEVICES"] = ""
        return env

    def _ensure_worker(
        self, cancel: threading.Event | None, start: float
    ) -> _WorkerProcess | Response:
        """The live worker, a fresh one, or a `startup` failure Response."""
        worker = self._worker
        if worker is not None and worker.alive():
            return worker
        if worker is not None:  # died while idle (killed from outside, orphan watch, ...)
            worker.kill()
            self._worker = None
        try:
            worker = _WorkerProcess(self._argv(), self._worker_env(), self._stderr_callback,
                                    self._cwd)
        except OSError as exc:
            return Response.failure(HELLO_ID, "startup", f"cannot start a worker: {exc}")
        self._started += 1
        deadline = time.monotonic() + self._startup_timeout_s
        try:
            ready = self._await_hello(worker, deadline, cancel)
        except _Timeout:
            worker.kill()
            return Response.failure(
                HELLO_ID, "startup",
                f"the worker was not ready within {self._startup_timeout_s:g} s",
                duration_s=time.monotonic() - start, **worker.exit_details(),
            )
        except _Cancelled:
            worker.kill()
            return Response.failure(HELLO_ID, "cancelled", "cancelled while the worker started")
        if not ready:
            worker.kill()
            return Response.failure(
                HELLO_ID, "startup", "the worker exited before it was ready",
                duration_s=time.monotonic() - start, **worker.exit_details(),
            )
        self._worker = worker
        return worker

    def _await_hello(
        self, worker: _WorkerProcess, deadline: float, cancel: threading.Event | None
    ) -> bool:
        """Wait for the readiness line; False at EOF.

        Anything printed on stdout before it (a sitecustomize, a .pth file) comes before the
        worker protects its channel: it is kept with the stderr tail, not taken as an answer.
        """
        while True:
            line = worker.next_line(deadline, cancel)
            if line is None:
                return False
            try:
                hello = Response.from_json(line)
            except ProtocolError:
                hello = None
            if hello is not None and hello.id == HELLO_ID and hello.ok:
                self.hello = hello.result if isinstance(hello.result, dict) else {}
                return True
            worker.stderr.append(b"[stdout before the worker was ready] " + line)

    def _retire(self, worker: _WorkerProcess) -> dict[str, Any]:
        worker.kill()
        if self._worker is worker:
            self._worker = None
        return worker.exit_details()

    def _failure(
        self, request: Request, kind: ErrorKind, message: str, start: float, **details: Any
    ) -> Response:
        return Response.failure(
            request.id, kind, message, duration_s=time.monotonic() - start, **details
        )

    def _exchange(
        self,
        worker: _WorkerProcess,
        request: Request,
        line: str,
        start: float,
        cancel: threading.Event | None,
    ) -> Response:
        task = request.task
        try:
            worker.send(line)
            reply = worker.next_line(start + request.timeout_s, cancel)
        except (BrokenPipeError, OSError, ValueError):
            reply = None  # the worker is gone: handled like EOF below
        except _Timeout:
            details = self._retire(worker)
            return self._failure(
                request, "timeout",
                f"{task} did not finish within {request.timeout_s:g} s; the worker was killed",
                start, **details,
            )
        except _Cancelled:
            details = self._retire(worker)
            return self._failure(request, "cancelled", f"{task} was cancelled", start, **details)

        if reply is None:
            details = self._retire(worker)
            if self._closed:
                return self._failure(
                    request, "cancelled", f"{task} stopped: the client was closed", start,
                    **details,
                )
            how = details["signal_name"] or f"exit code {details['exit_code']}"
            return self._failure(
                request, "crash", f"the worker died while running {task} ({how})", start,
                **details,
            )
        try:
            response = Response.from_json(reply)
            if response.id != request.id:
                raise ProtocolError(f"answer to request {response.id}, expected {request.id}")
        except ProtocolError as exc:
            details = self._retire(worker)
            return self._failure(
                request, "protocol",
                f"the worker wrote an invalid response while running {task} ({exc}): "
                f"{reply[:200]!r}",
                start, **details,
            )
        if response.error is not None and response.error.kind == "cuda_fatal":
            self._retire(worker)  # it exits on its own too; never reuse a poisoned context
        return response
