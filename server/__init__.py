"""KernelStitch language server (pygls): `python -m kernelstitch.server [--tcp --host --port]`.

Importing this package is cheap: pygls and the features load only when `main` runs, and
nothing here ever imports torch or executes user code.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kernelstitch-server",
                                     description="KernelStitch language server (stdio by default)")
    parser.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=2087)
    parser.add_argument("--log-level", default="WARNING",
                        help="logging level for stderr (DEBUG, INFO, WARNING)")
    parser.add_argument("--stdio", action="store_true", help="accepted for client compatibility")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the server until the client says exit; what `kernelstitch serve` calls."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stdin = stdout = None
    if not args.tcp:
        # Answer `initialize` from the cache of earlier answers before pygls loads (~0.7 s).
        from kernelstitch.server import early_initialize

        early = early_initialize.start(sys.stdin.buffer, sys.stdout.buffer)
        stdin = early_initialize.ReplayReader(early.prefix, sys.stdin.buffer)
        stdout = early_initialize.AnswerFilter(sys.stdout.buffer, early)
    from kernelstitch.server.app import build_server

    server = build_server()
    # Whatever ends the server (exit, the client's stdin closing, SIGTERM or SIGHUP from the
    # editor), its jobs and their workers end with it: they run in process groups of their own.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    try:
        if args.tcp:
            server.start_tcp(args.host, args.port)
        else:
            server.start_io(stdin, stdout)
    finally:
        server.jobs.kill_all_now()
    return 0


def _exit_on_signal(signum: int, frame) -> None:
    raise SystemExit(128 + signum)
