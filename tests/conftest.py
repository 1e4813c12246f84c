"""Suite-wide settings.  KERNELSTITCH_CPU_NVCC=0: without a GPU the pipeline compiles the
built-in kernels with nvcc (agents/cpu_compile.py); every CPU test that generates would spend
minutes in ptxas, so only tests/test_cpu_compile.py turns it back on (the env reaches the CLI
and job subprocesses the tests start).  KERNELSTITCH_CACHE_DIR: the servers the tests start keep
their cached `initialize` answers (server/early_initialize.py) in a folder of this run, not in
the user's ~/.cache."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("KERNELSTITCH_CPU_NVCC", "0")
if "KERNELSTITCH_CACHE_DIR" not in os.environ:  # xdist workers inherit the controller's folder
    os.environ["KERNELSTITCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelstitch-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KERNELSTITCH_CACHE_DIR"], True)
