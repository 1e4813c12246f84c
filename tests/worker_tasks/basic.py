"""CPU tasks that misbehave on purpose, one way each."""

from __future__ import annotations

import ctypes
import os
import sys
import time


def echo(value):
    return {"value": value, "pid": os.getpid()}


def pid() -> int:
    return os.getpid()


def boom(message: str):
    raise ValueError(message)


def spin_forever():
    while True:
        pass


def sleep_forever():
    while True:
        time.sleep(10)


def abort():
    os.abort()


def segfault():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def exit_with(code: int):
    sys.exit(code)


def hard_exit(code: int):
    os._exit(code)


def chatty(lines: int) -> str:
    """Python print, a raw write to fd 1 and C printf: none may reach the protocol channel."""
    for i in range(lines):
        print(f"print line {i}")
    os.write(1, b"raw fd 1 write\n")
    libc = ctypes.CDLL(None)
    libc.printf(b"C printf line\n")
    libc.fflush(None)
    return "still clean"


def flood_stderr(megabytes: int) -> int:
    """Far more stderr than a pipe buffer holds (64 KiB): blocks unless the client drains."""
    block = b"x" * 1023 + b"\n"
    for _ in range(megabytes * 1024):
        os.write(2, block)
    return megabytes


def allocate(megabytes: int) -> int:
    data = bytearray(megabytes * 1024 * 1024)
    return len(data)


def unserialisable():
    return object()


def corrupt_protocol():
    """Writes on the protocol channel directly, as only a badly behaved extension could."""
    from kernelstitch.core.worker import serve

    serve._channel.write(b"this is not json\n")
    serve._channel.flush()
    return "unreachable for the client"


def worker_env(name: str):
    return os.environ.get(name)


def sys_path_head() -> list:
    return sys.path[:3]
