"""Limits for processes that run untrusted code: a write guard and a scrubbed environment.

Stdlib only (ctypes).  Used by the worker (serve.py) when its client asks for a guard:

* **Write guard**: Linux Landlock (kernel 5.13+), applied to the whole worker process before any
  thread exists and before any task runs, and inherited by every child (ninja, nvcc, gcc).
  Only write-type file accesses are handled (write, truncate, create, remove, rename/link,
  make node/dir/symlink), so reading and executing stay open; writes are allowed only beneath
  the given folders (a private temp folder, the compile caches, /dev for the GPU device files
  and /dev/shm) and the process's own /proc/PID (the CUDA driver writes there).  With ABI v4+ TCP connect/bind are denied too (nothing a candidate needs; it
  closes the simplest way out for anything it read), with ABI v6+ signals to processes outside
  the sandbox.  Landlock also denies ptrace and /proc/PID/mem of processes outside the sandbox,
  and, once a root worker has dropped its capabilities (done here too), /proc/PID/environ.
  Where Landlock is missing (ENOSYS, EOPNOTSUPP: an old kernel or one built without it) the
  guard reports itself unavailable and the caller falls back to detecting changes by hashing.
* **Attempt log**: a `sys.addaudithook` hook records Python-level writes outside the allowed
  folders (open for writing, rename, remove, mkdir, chmod, ...): Landlock refuses them, the log
  names them.  Best effort: native code bypasses the hook (but not Landlock).
* **Scrubbed environment**: `scrub_env` drops variables that hold credentials (names like
  *_KEY, *_TOKEN, *_SECRET, *_PASSWORD, values that look like API keys, names given).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

# Set (to anything) in the environment that starts the workers: no Landlock, detection only
# (the tests' way to run the fallback on a kernel that has Landlock).
DISABLE_ENV = "KS_NO_LANDLOCK"
# syscall numbers (the same on every architecture that has Landlock: asm-generic numbering)
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_*
FS_WRITE_FILE = 1 << 1
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_SIGNAL = 1 << 1  # ABI 6

_WRITE_V1 = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR
             | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)


def _write_access(abi: int) -> int:
    access = _WRITE_V1
    if abi >= 2:
        access |= FS_REFER
    if abi >= 3:
        access |= FS_TRUNCATE
    return access


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class GuardStatus:
    """What a process's write guard is: `enforced` by Landlock (ABI `abi`) or not (`reason`)."""

    enforced: bool
    abi: int = 0
    reason: str = ""
    allowed: tuple[str, ...] = ()
    deny_tcp: bool = False
    capabilities_dropped: bool = False  # a root worker gave up its capabilities

    def to_json(self) -> dict:
        return {**asdict(self), "allowed": list(self.allowed)}

    @classmethod
    def from_json(cls, data: Mapping | None) -> GuardStatus | None:
        if not data:
            return None
        return cls(bool(data.get("enforced")), int(data.get("abi") or 0),
                   str(data.get("reason") or ""), tuple(data.get("allowed") or ()),
                   bool(data.get("deny_tcp")), bool(data.get("capabilities_dropped")))

    def describe(self) -> str:
        if self.enforced:
            extra = (", no TCP" if self.deny_tcp else "") + (
                ", no capabilities" if self.capabilities_dropped else "")
            return f"write guard: landlock ABI v{self.abi}{extra}"
        return f"write guard: unavailable ({self.reason}), detection by hashing"


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> tuple[int, str]:
    """(ABI version, "") where Landlock works; (0, why not) otherwise.  Changes nothing."""
    if os.environ.get(DISABLE_ENV):
        return 0, f"turned off by {DISABLE_ENV}"
    if not sys.platform.startswith("linux"):
        return 0, f"not Linux ({sys.platform})"
    try:
        libc = _libc()
    except OSError as exc:
        return 0, f"no libc: {exc}"
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 0:
        err = ctypes.get_errno()
        name = errno.errorcode.get(err, str(err))
        why = {errno.ENOSYS: "the kernel has no Landlock",
               errno.EOPNOTSUPP: "Landlock is disabled at boot"}.get(err, os.strerror(err))
        return 0, f"{why} ({name})"
    return int(abi), ""


def _prepare(paths: Iterable[str]) -> list[str]:
    """Absolute, existing folders (created when missing); duplicates dropped."""
    out: list[str] = []
    for path in paths:
        if not path:
            continue
        full = os.path.realpath(os.path.abspath(path))
        try:
            os.makedirs(full, exist_ok=True)
        except OSError:
            if not os.path.exists(full):
                continue
        if full not in out:
            out.append(full)
    return out


PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _has_capabilities() -> bool:
    try:
        status = open("/proc/self/status", encoding="ascii").read()
    except OSError:
        return os.geteuid() == 0
    found = re.search(r"^CapPrm:\s*([0-9a-f]+)", status, re.MULTILINE)
    return bool(found and int(found.group(1), 16))


def drop_capabilities() -> bool:
    """Give up every capability, for this process and (through the bounding set) for the
    programs it starts, root's included.  A root process keeps CAP_SYS_PTRACE otherwise, and
    with it reads /proc/PID/environ of other processes through Landlock's ptrace restriction.
    True when it had capabilities and now has none."""
    if not sys.platform.startswith("linux") or not _has_capabilities():
        return False
    libc = _libc()
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the kernel's last capability
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    return libc.capset(ctypes.byref(header), data) == 0 and not _has_capabilities()


def apply_write_guard(allowed: Iterable[str], deny_tcp: bool = True) -> GuardStatus:
    """Restrict this process (and its future children) to writing beneath `allowed`, and drop
    its capabilities (a root worker).

    Call it while the process has a single thread: Landlock binds the calling thread and the
    threads and processes it creates later, not threads that already exist."""
    status = _apply_landlock(allowed, deny_tcp)
    if drop_capabilities():
        status = dataclasses.replace(status, capabilities_dropped=True)
    return status


# Always writable for a guarded process: its own /proc folder (the path resolves to /proc/PID
# when the rule is made, so children do not share it).  The CUDA driver writes there while it
# initialises: without it an H100 worker failed with "Error 304: OS call failed".
OWN_PROC = "/proc/self"


def _apply_landlock(allowed: Iterable[str], deny_tcp: bool) -> GuardStatus:
    folders = _prepare([*allowed, OWN_PROC])
    abi, why = landlock_abi()
    if abi <= 0:
        return GuardStatus(False, 0, why, tuple(folders))
    libc = _libc()
    access = _write_access(abi)
    attr = _RulesetAttr(access, (NET_BIND_TCP | NET_CONNECT_TCP) if deny_tcp and abi >= 4 else 0,
                        SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr),
                           ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return GuardStatus(False, abi, f"landlock_create_ruleset: "
                           f"{os.strerror(ctypes.get_errno())}", tuple(folders))
    try:
        for folder in folders:
            fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(access, fd)
                if libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                                ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                                ctypes.c_uint32(0)) < 0:
                    return GuardStatus(False, abi, f"landlock_add_rule({folder}): "
                                       f"{os.strerror(ctypes.get_errno())}", tuple(folders))
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return GuardStatus(False, abi, f"prctl(NO_NEW_PRIVS): "
                               f"{os.strerror(ctypes.get_errno())}", tuple(folders))
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset),
                        ctypes.c_uint32(0)) < 0:
            return GuardStatus(False, abi, f"landlock_restrict_self: "
                               f"{os.strerror(ctypes.get_errno())}", tuple(folders))
    finally:
        os.close(ruleset)
    return GuardStatus(True, abi, "", tuple(folders), deny_tcp and abi >= 4)


# --------------------------------------------------------------------------------------------
# The attempt log: Python-level writes outside the allowed folders

MAX_ATTEMPTS = 50
_attempts: list[dict[str, str]] = []
_allowed_roots: tuple[str, ...] = ()
_in_hook = threading.local()
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {  # audit event -> indexes of the path arguments it writes
    "os.rename": (0, 1), "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,),
    "os.chmod": (0,), "os.chown": (0,), "os.truncate": (0,), "os.symlink": (1,),
    "os.link": (1,), "os.utime": (0,), "shutil.copyfile": (1,), "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
}


def _path_text(value) -> str | None:
    if isinstance(value, int):
        return None  # a descriptor: opened earlier (and checked then)
    try:
        text = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.normpath(os.path.abspath(text))


def _outside(path: str) -> bool:
    return not any(path == root or path.startswith(root.rstrip("/") + "/")
                   for root in _allowed_roots)


def _record(event: str, path: str) -> None:
    if len(_attempts) < MAX_ATTEMPTS:
        _attempts.append({"event": event, "path": path})


def _hook(event: str, args: tuple) -> None:
    if event != "open" and event not in _PATH_EVENTS:
        return
    if getattr(_in_hook, "busy", False):
        return
    _in_hook.busy = True
    try:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (any(c in mode for c in "wax+") if isinstance(mode, str)
                      else isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            targets = (path,) if writes else ()
        else:
            targets = tuple(args[i] for i in _PATH_EVENTS[event] if i < len(args))
        for target in targets:
            text = _path_text(target)
            if text is not None and _outside(text):
                _record(event, text)
    except Exception:  # noqa: BLE001, S110 - a log must never break the process it watches
        pass
    finally:
        _in_hook.busy = False


def watch_write_attempts(allowed: Iterable[str]) -> None:
    """Log Python-level writes outside `allowed` from now on (audit hooks cannot be removed)."""
    global _allowed_roots
    _allowed_roots = tuple(os.path.normpath(os.path.realpath(p)) for p in allowed) + tuple(
        os.path.normpath(os.path.abspath(p)) for p in allowed)
    sys.addaudithook(_hook)


def write_attempts() -> list[dict[str, str]]:
    """Writes outside the allowed folders seen so far (at most MAX_ATTEMPTS)."""
    return [dict(a) for a in _attempts]


# --------------------------------------------------------------------------------------------
# The environment of a process that runs untrusted code

_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|ACCESS_KEY(_ID)?"
    r"|PRIVATE_KEY|AUTH)($|_)", re.IGNORECASE)
_SECRET_NAMES = {"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "NETRC", "PGPASSFILE",
                 "GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG", "DOCKER_AUTH_CONFIG"}
# Prefixes of API keys (OpenAI, Anthropic, Groq, Hugging Face, xAI, GitHub, GitLab, Slack,
# Google): a variable holding one is dropped whatever its name.
_KEY_VALUE_PREFIXES = ("sk-", "sk_", "gsk_", "hf_", "xai_", "ghp_", "gho_", "ghs_",
                       "github_pat_", "glpat-", "xoxb-", "xoxp-", "AIza")
_MIN_KEY_VALUE = 12


def is_secret_name(name: str) -> bool:
    return name.upper() in _SECRET_NAMES or bool(_SECRET_NAME.search(name))


def looks_like_key(value: str) -> bool:
    value = value.strip()
    return len(value) >= _MIN_KEY_VALUE and value.startswith(_KEY_VALUE_PREFIXES) \
        and " " not in value


def scrub_env(env: Mapping[str, str], names: Iterable[str] = ()) -> tuple[dict[str, str],
                                                                          list[str]]:
    """(`env` without credentials, the names dropped).  Dropped: the `names` given (the LLM
    configuration's key variable), secret-like names, key-like values, and any variable whose
    value is one of the dropped values (a copy under another name)."""
    explicit = {n for n in names if n}
    dropped = {k for k, v in env.items()
               if k in explicit or is_secret_name(k) or looks_like_key(v)}
    secret_values = {env[k] for k in dropped if len(env[k]) >= 8}
    dropped |= {k for k, v in env.items() if v in secret_values}
    return {k: v for k, v in env.items() if k not in dropped}, sorted(dropped)
