import sys

from kernelstitch.server import main

sys.exit(main(sys.argv[1:]))
