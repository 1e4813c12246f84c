"""Cold-build times of generated candidates (on a GPU machine, from the repository root):

    python bench/build_time_probe.py [--parallel N] model_new.py...

Each candidate's `_build_extension()` runs in a fresh process with empty KS_EXTENSIONS_DIR and
TORCH_EXTENSIONS_DIR (so candidates generated before the compile cache, which build under
torch's folder, are cold too), N at a time with MAX_JOBS = cores / N as in the bench's prepare
phase.  Prints each build's seconds and its ninja steps (main.o: the binding, cuda.cuda.o: the
kernels, *.so: the link), then the median.  A second pass with --warm times the cache hits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("ks_probe", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({"library": module._build_extension().__file__}))
"""


def ninja_steps(folder: Path) -> dict[str, float]:
    steps = {}
    log = folder / ".ninja_log"
    for line in log.read_text().splitlines() if log.exists() else []:
        fields = line.split("\t")
        if len(fields) >= 4 and fields[0].isdigit():
            steps[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    return steps


def build(path: Path, root: Path, jobs: int) -> tuple[Path, float, str]:
    env = {**os.environ, "KS_EXTENSIONS_DIR": str(root / "ks"),
           "TORCH_EXTENSIONS_DIR": str(root / "torch"), "MAX_JOBS": str(jobs)}
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, capture_output=True,
                         text=True, check=False)
    seconds = time.monotonic() - start
    if run.returncode != 0:
        return path, seconds, "FAILED: " + (run.stderr or run.stdout)[-800:]
    folder = Path(json.loads(run.stdout.strip().splitlines()[-1])["library"]).parent
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in ninja_steps(folder).items())
    return path, seconds, steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--parallel", type=int, default=1, help="builds at once (bench: 14)")
    parser.add_argument("--warm", action="store_true", help="then build again (cache hits)")
    args = parser.parse_args()
    jobs = max(1, (os.cpu_count() or 1) // args.parallel)
    with tempfile.TemporaryDirectory(prefix="ks_probe_") as tmp:
        for label in ("cold", "warm") if args.warm else ("cold",):
            roots = [Path(tmp) / f"{k}" for k in range(len(args.files))]
            with ThreadPoolExecutor(max_workers=args.parallel) as pool:
                results = list(pool.map(build, args.files, roots, [jobs] * len(args.files)))
            for path, seconds, steps in results:
                print(f"{label} {seconds:6.1f} s  {path}  ({steps})", flush=True)
            print(f"{label} median {statistics.median(s for _, s, _ in results):.1f} s over "
                  f"{len(results)} builds, {args.parallel} at once, MAX_JOBS={jobs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
