"""`python -m kernelstitch.core.worker`: a worker process (see serve.py)."""

import sys

from kernelstitch.core.worker.serve import main

if __name__ == "__main__":
    sys.exit(main())
