"""What a planner or layout change does to the shared set's plans, on a CPU (no GPU, no build).

    python bench/plan_diff.py capture .kb/kernelbench /tmp/cap --levels 1 2 3   # once: graphs
    python bench/plan_diff.py plan /tmp/cap before.json                          # this checkout
    ... change the planner / coder layout ...
    python bench/plan_diff.py plan /tmp/cap after.json
    python bench/plan_diff.py diff before.json after.json

`capture` writes each problem's captured graph (a fresh worker per problem, two at a time, as
`kernelstitch bench-coverage` does); `plan` records, for every graph, the built-in plan's steps
(technique and nodes) and, for every channels-last variant the planner proposes, the tensors the
coder keeps NHWC (agents/coder/layout.py); `diff` lists the problems whose plans or kept sets
differ.  A change meant for one pattern should change the problems that have it and no others
(2026-11-28: the views rewrite changed level2/38's plan only, of 211 captured problems).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def capture(root: Path, out: Path, levels: list[str], timeout_s: float) -> None:
    from kernelstitch.bench.coverage import capture_in_worker

    out.mkdir(parents=True, exist_ok=True)
    files = [f for level in levels for f in sorted((root / f"level{level}").glob("*.py"))]

    def one(path: Path) -> str | None:
        dest = out / f"{path.parent.name}__{path.stem}.json"
        if dest.exists():
            return None
        response = capture_in_worker(path, None, timeout_s)
        if not response.ok:
            return f"{path.parent.name}/{path.stem}: {str(response.error)[:160]}"
        dest.write_text(json.dumps(response.result))
        return None

    with ThreadPoolExecutor(2) as pool:
        for failure in pool.map(one, files):
            if failure:
                print("not captured:", failure)
    print(len(list(out.glob("*.json"))), "graphs in", out)


def plans(graphs: Path, out: Path) -> None:
    from kernelstitch.agents.coder.layout import ChannelsLastReaders
    from kernelstitch.agents.plan.graph import Graph
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.planner.variants import propose_variants

    record: dict[str, object] = {}
    for path in sorted(graphs.glob("*.json")):
        try:
            graph = Graph.from_json(json.loads(path.read_text()))
            record[path.stem] = [[s.technique, list(s.nodes)] for s in plan_builtin(graph).steps]
            for variant in propose_variants(graph, limit=None):
                if variant.plan.host.channels_last:
                    layout = ChannelsLastReaders(variant.plan, variant.plan.graph)
                    record[f"{path.stem}:{variant.name}:nhwc"] = sorted(layout.channels_last_tensors())
        except Exception as exc:  # noqa: BLE001 - a planner failure is this problem's record
            record[path.stem] = f"error {type(exc).__name__}: {exc}"[:200]
    out.write_text(json.dumps(record, indent=0))
    print(len(record), "records in", out)


def diff(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    for key in changed:
        print(key)
        print("   before:", _short(a.get(key)))
        print("   after: ", _short(b.get(key)))
    print(f"{len(changed)} of {len(set(a) | set(b))} records differ")
    return 0


def _short(value: object) -> str:
    if isinstance(value, list) and value and isinstance(value[0], list):
        return " | ".join(f"{t}:{','.join(n[:3])}" for t, n in value)
    return str(value)[:300]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("capture")
    c.add_argument("root", type=Path)
    c.add_argument("out", type=Path)
    c.add_argument("--levels", nargs="+", default=["1", "2", "3"])
    c.add_argument("--timeout", type=float, default=150.0)
    p = sub.add_parser("plan")
    p.add_argument("graphs", type=Path)
    p.add_argument("out", type=Path)
    d = sub.add_parser("diff")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "capture":
        capture(args.root, args.out, args.levels, args.timeout)
    elif args.command == "plan":
        plans(args.graphs, args.out)
    else:
        return diff(args.before, args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
