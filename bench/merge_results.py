"""Summary of bench runs merged per problem: the later results.json files replace the earlier
ones' outcomes of the same problems (cancelled outcomes never replace).  For a partial rerun of a
level after a compiler change; the output says which file each problem came from, since a merged
table mixes commits and is no substitute for one run.

Usage: python bench/merge_results.py BASE.json NEWER.json [NEWER2.json ...]"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelstitch.bench.metrics import summarise
from kernelstitch.bench.outcome import ProblemOutcome


def merge(paths: list[Path]) -> tuple[dict[str, ProblemOutcome], dict[str, Path]]:
    outcomes: dict[str, ProblemOutcome] = {}
    source: dict[str, Path] = {}
    for path in paths:
        for item in json.loads(path.read_text(encoding="utf-8"))["problems"]:
            if item["status"] == "cancelled":
                continue
            outcomes[item["problem"]] = ProblemOutcome.from_json(item)
            source[item["problem"]] = path
    return outcomes, source


def main(args: list[str]) -> None:
    paths = [Path(a) for a in args]
    outcomes, source = merge(paths)
    for path in paths:
        names = sorted(p for p, s in source.items() if s == path)
        print(f"{path}: {len(names)} problems")
    s = summarise(list(outcomes.values()))
    print(f"problems {s['problems']}, correct {s['accepted']} (kept {s['kept']}), "
          f"significantly slower than eager {s['slower_than_eager']}")
    print(f"geomean vs eager {s['geomean_speedup_vs_eager']:.3f}, vs torch.compile "
          f"{s['geomean_speedup_vs_compiled']:.3f}, fast_1 vs torch.compile {s['fast_p_vs_compiled']['1.0']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
