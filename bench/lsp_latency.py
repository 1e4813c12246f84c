"""Typing latency of `kernelstitch serve` (issue 25's benchmark, not a timed test): a 5,000-line
file of ~230 modules, 500 edits (each a didChange of the whole text, as a client without
incremental sync sends), each followed at once by a code action and a hover near the edit, then a
pause (`--pause-ms`, default 200: a typing cadence slower than the server's 150 ms re-scan
debounce, so the background re-scans run between keystrokes as they do for a user).
Prints p50 / p95 / p99 / max per request kind and the start-up time to `initialize` answered:
cold (a fresh answer cache: pygls loads, then answers), warm (answered from the cache of the
first start, server/early_initialize.py) and with the cache off (KERNELSTITCH_NO_EARLY_INITIALIZE=1),
warm and off interleaved so that both see the same machine load; and the load average.

Usage: python bench/lsp_latency.py [--edits 500] [--pause-ms 200] [--starts 9] [--json OUT.json]"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "lsp"))
from raw_client import RawClient  # noqa: E402

MODULE = '''

class Block{k}(nn.Module):
    """Block {k}."""

    def __init__(self, features: int = 64):
        super().__init__()
        self.lin = nn.Linear(features, features)
        self.scale = {k}.0

    def forward(self, x):
        y = self.lin(x)
        y = torch.relu(y) * self.scale
        return y + x


def get_inputs_Block{k}():
    return [torch.randn(8, 64)]


def get_init_inputs_Block{k}():
    return [64]
'''


def source(modules: int) -> str:
    return "import torch\nimport torch.nn as nn\n" + "".join(MODULE.format(k=k) for k in range(modules))


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50_ms": 1e3 * pick(0.50), "p95_ms": 1e3 * pick(0.95), "p99_ms": 1e3 * pick(0.99),
            "max_ms": 1e3 * ordered[-1], "mean_ms": 1e3 * statistics.fmean(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=500)
    parser.add_argument("--modules", type=int, default=229)
    parser.add_argument("--pause-ms", type=float, default=200.0)
    parser.add_argument("--starts", type=int, default=9)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ks_latency_"))
    cache = {"KERNELSTITCH_CACHE_DIR": str(root / "cache")}
    starts: dict[str, list[float]] = {"cold": [], "warm": [], "off": []}
    load_before = os.getloadavg()[0]
    for k in range(args.starts + 1):
        for mode in (["cold"] if k == 0 else ["warm", "off"]):
            env = {**cache, "KERNELSTITCH_NO_EARLY_INITIALIZE": "1" if mode == "off" else "0"}
            began = time.perf_counter()
            client = RawClient(root, env=env)  # returns once initialize is answered
            starts[mode].append(time.perf_counter() - began)
            client.close()
    load_after = os.getloadavg()[0]
    text = source(args.modules)
    lines = text.split("\n")
    path = root / "blocks.py"
    path.write_text(text)
    uri = path.as_uri()
    client = RawClient(root)
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": text}})
    client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    rng = random.Random(0)
    times: dict[str, list[float]] = {"codeAction": [], "hover": []}
    forward_lines = [i for i, s in enumerate(lines) if s.strip().startswith("y = torch.relu")]
    for version in range(2, args.edits + 2):
        line = rng.choice(forward_lines)
        if rng.random() < 0.8:  # typing inside a method
            lines[line] += rng.choice(["1", " ", "*", "x", "("])
        else:  # Enter: lines below move
            lines.insert(line + 1, "        z = y")
            forward_lines = [i for i, s in enumerate(lines) if s.strip().startswith("y = torch.relu")]
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [{"text": "\n".join(lines)}]})
        at = {"line": line, "character": 4}
        began = time.perf_counter()
        client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": at, "end": at},
                                                   "context": {"diagnostics": []}})
        times["codeAction"].append(time.perf_counter() - began)
        began = time.perf_counter()
        client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": at})
        times["hover"].append(time.perf_counter() - began)
        time.sleep(args.pause_ms / 1e3)
    client.close()
    report = {"lines": len(lines), "modules": args.modules, "edits": args.edits, "pause_ms": args.pause_ms,
              "startup_to_initialize_s": {mode: {"median": statistics.median(v), "all": v}
                                          for mode, v in starts.items()},
              "load_average_1min": [load_before, load_after],
              **{kind: percentiles(v) for kind, v in times.items()}}
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
