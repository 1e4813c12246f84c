"""Worker processes: user code and generated code never run in the caller's process.

`WorkerClient` (client.py) starts `python -m kernelstitch.core.worker` (serve.py) and speaks the
JSON-lines protocol of protocol.py with it.  Built-in tasks live in builtin_tasks.py.
"""

from kernelstitch.core.worker.client import WorkerClient
from kernelstitch.core.worker.protocol import Request, Response, WorkerError

__all__ = ["Request", "Response", "WorkerClient", "WorkerError"]
