"""Suite-wide settings.  KERNELSTITCH_CPU_NVCC=0: without a GPU the pipeline compiles the
built-in kernels with nvcc (agents/cpu_compile.py); every CPU test that generates would spend
minutes in ptxas, so only tests/test_cpu_compile.py turns it back on (the env reaches the CLI
and job subprocesses the tests start)."""

import os

os.environ.setdefault("KERNELSTITCH_CPU_NVCC", "0")
