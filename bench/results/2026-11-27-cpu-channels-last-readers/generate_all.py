import sys
from pathlib import Path

from kernelstitch.agents.inprocess import generate_builtin

p = Path(sys.argv[1])
try:
    c = generate_builtin(p, None, Path("/tmp/gen_all") / p.parent.name / p.stem / "model_new.py")
    print("OK", p.parent.name + "/" + p.stem, len(c.kernels))
except Exception as e:
    print("ERR", p.parent.name + "/" + p.stem, type(e).__name__, str(e)[:200].replace("\n", " "))
