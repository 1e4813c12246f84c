#!/usr/bin/env bash
# A/B of source trees on one multi-GPU machine: each side benches the same problems on its own
# GPUs, importing its own tree (scripts/ks_site.sh: nothing pip-installed), so every ratio between
# sides is measured on one machine at one time.
#   SIDES="name=TREE:GPUS ..."  TREE: "." (this working tree) or a tarball of one
#     (`git archive REV agents kernelstitch profiler server pyproject.toml > x.tar`); GPUS: e.g. 0,1
#   LIST: bench --only list; LIMIT: seconds for the benches (default 540); OUT: results folder.
# Prints, per problem and side, the status, the best variant (ms) and the original replayed from a
# CUDA graph, from each side's results.json (the whole files stay under $OUT/<name>/).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
LIMIT=${LIMIT:-540}
start=$SECONDS
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} PYTHONUNBUFFERED=1
source scripts/ks_site.sh
pids=()
for side in $SIDES; do
  name=${side%%=*}; rest=${side#*=}; tree=${rest%%:*}; gpus=${rest##*:}
  if [ "$tree" = . ]; then root=$PWD; else root=/tmp/ab_tree_$name; mkdir -p "$root"; tar -xf "$tree" -C "$root"; fi
  ks_site /tmp/ab_site_$name "$root"
  PYTHONPATH=/tmp/ab_site_$name python -c "import kernelstitch.agents as a; print('$name imports', a.__file__)"
  jobs=$(echo "$gpus" | tr ',' '\n' | wc -l)
  mkdir -p "$OUT/$name"
  (PYTHONPATH=/tmp/ab_site_$name CUDA_VISIBLE_DEVICES=$gpus timeout --foreground -s INT -k 15 \
     $((LIMIT - (SECONDS - start))) python -m kernelstitch bench .kb/kernelbench --out "$OUT/$name" \
     --workspace /tmp/ab_ws_$name --jobs "$jobs" --build-jobs 8 --time-limit 240 --timing-budget 1 \
     --only "$LIST" >"$OUT/$name/console.log" 2>&1
   echo "side $name exit $? at $((SECONDS - start)) s") & pids+=($!)
done
wait "${pids[@]}"
rm -f "$OUT"/*/*.png
python - "$OUT" $SIDES <<'P'
import json, sys
from pathlib import Path
out, sides = Path(sys.argv[1]), [s.split("=")[0] for s in sys.argv[2:]]
rows = {}
for side in sides:
    try:
        problems = json.loads((out / side / "results.json").read_text())["problems"]
    except (OSError, ValueError, KeyError):
        print(f"{side}: no results.json"); continue
    for p in problems:
        v = {k: x for k, x in (p.get("variants_ms") or {}).items() if isinstance(x, float)}
        ours = {k: x for k, x in v.items() if not k.startswith("original")}
        best = min(ours, key=ours.get) if ours else None
        rows.setdefault(p["problem"], {})[side] = (
            f"{p['status']} {best} {ours[best]:.3f}" if best else p["status"]) + (
            f" | orig-graph {v['original-graph']:.3f}" if "original-graph" in v else "")
for problem, by_side in rows.items():
    print(problem)
    for side in sides:
        print(f"  {side:10} {by_side.get(side, '-')}")
P
echo "script used $((SECONDS - start)) s"
