#!/usr/bin/env bash
# `kernelstitch bench PROBLEMS` on a lent GPU machine, resumable across machines and calls.
#
# Usage: [KS_TIME_LIMIT=per-problem seconds, default 420] \
#        scripts/device_bench.sh SECONDS [PROBLEMS] [extra bench options...]
#   SECONDS   the whole call, install and hand-back included (give the device call's limit
#             minus a few seconds, e.g. 560 for a 600 s call)
#   PROBLEMS  the problem folder (default examples); for KernelBench: `make kb` here, then
#             carry `.kb` and pass .kb/kernelbench (e.g. `... 560 .kb/kernelbench --levels 2`)
#
# Resuming: the bench results come back as $OUT/runs.sqlite (only the bench's results, a few KB
# a problem).  Copy that file to .kb/runs.sqlite here and carry `.kb` in the next call: this
# script then uses it as the run store, and the call skips every problem already measured.
# (Carrying `.kernelstitch` with the file at .kernelstitch/runs.sqlite works too.)
#
# --ray on the lent machine (issue 28): KS_RAY_BUNDLE=DIR names a carried folder holding
# ray.tar.xz (an unpacked ray wheel for the machine's Python, trimmed of rllib/tune/data/jars and
# the dashboard's web client to fit a carry) and the wheels ray needs that the image lacks
# (jsonschema & co.); scripts/make_ray_bundle.sh makes it.  The script unpacks it into site-packages, starts a local head with one GPU
# per card, and passes `--ray auto`; if the head does not start it says so and uses the options
# as given.
#
# The call's limit: the bench gets SECONDS minus the install time minus RESERVE, then a SIGINT
# (finished problems are saved, running and queued ones are `cancelled`, the report is still
# written); if it has not exited GRACE s later it is killed.  Either way the run store is copied
# back.  `cancelled` problems are never stored: the next call runs them.  A problem that
# reaches its own --time-limit is a `timeout` and never affects the problems behind it.
set -u
start=$SECONDS
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/bench"
limit=$1; shift
problems=examples
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then problems=$1; shift; fi
if [ ! -d "$problems" ]; then
    echo "no problem folder $problems here (KernelBench: run \`make kb\` and carry .kb)"; exit 2
fi
reserve=${KS_RESERVE:-25}; grace=${KS_GRACE:-15}
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
mkdir -p .kernelstitch
if [ -f .kb/runs.sqlite ]; then  # the backup API replaces the store (and any WAL) cleanly
    python -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" \
        .kb/runs.sqlite .kernelstitch/runs.sqlite && echo "resuming from .kb/runs.sqlite"
fi
ray_opts=()
if [ -n "${KS_RAY_BUNDLE:-}" ]; then
    site=$(python -c "import site; print(site.getsitepackages()[0])")
    tar -xJf "$KS_RAY_BUNDLE/ray.tar.xz" -C "$site" && \
        python -m pip install -q --no-deps --no-index "$KS_RAY_BUNDLE"/*.whl >>"$OUT/install.log" 2>&1
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
    if python -m ray.scripts.scripts start --head --num-gpus "$gpus" --include-dashboard=false --disable-usage-stats \
            >"$OUT/ray_start.log" 2>&1 && timeout 120 python -c "import ray; ray.init('auto'); \
print('ray', ray.__version__, 'task sees CUDA_VISIBLE_DEVICES =', ray.get(ray.remote(num_gpus=1)( \
lambda: __import__('os').environ.get('CUDA_VISIBLE_DEVICES')).remote()))" >>"$OUT/ray_start.log" 2>&1; then
        echo "ray: local head with $gpus GPU(s); $(tail -1 "$OUT/ray_start.log")"
        ray_opts=(--ray auto)
    else
        echo "ray: the head did not start or ran no task (ray_start.log below); running without --ray"
        tail -5 "$OUT/ray_start.log"
    fi
fi
left=$((limit - (SECONDS - start) - reserve - grace))
per_problem=${KS_TIME_LIMIT:-420}
if [ "$left" -lt 30 ]; then echo "only ${left} s left for the bench: give more SECONDS"; exit 2; fi
if [ "${per_problem%.*}" -gt "$left" ]; then
    echo "note: --time-limit $per_problem is longer than the ${left} s this call has left: a problem"
    echo "      that needs all of it is cancelled by the call's limit (and runs again next call)"
fi
echo "bench: $problems $*, ${left} s for the bench, --time-limit $per_problem per problem"
# SIGINT, not SIGTERM: the harness then cancels running problems, saves what finished, and
# still writes the report.  --foreground: to the harness only, once (without it `timeout` also
# signals the process group, a second SIGINT); the harness stops its workers itself.
timeout --foreground -s INT -k "$grace" "$left" kernelstitch bench "$problems" --out "$OUT/bench" \
    --workspace "$PWD" --build-jobs 14 --time-limit "$per_problem" "${ray_opts[@]}" "$@" \
    >"$OUT/bench/console.log" 2>&1
status=$?
[ ${#ray_opts[@]} -gt 0 ] && python -m ray.scripts.scripts stop --force >/dev/null 2>&1
case $status in
    0|1) echo "bench exit status $status (finished: 0 all accepted, 1 some not)";;
    124) echo "bench exit status 124: this call's limit stopped it (SIGINT after ${left} s):" \
              "problems running or queued then are 'cancelled', not stored; the next call runs them";;
    137) echo "bench exit status 137: killed ${grace} s after the SIGINT; no report this call," \
              "but every finished problem is in the run store";;
    *) echo "bench exit status $status"; tail -20 "$OUT/bench/console.log";;
esac
python -c "import sys; from kernelstitch.bench.resume import export_store as e; \
print(e(sys.argv[1], sys.argv[2]), 'bench results returned in', sys.argv[2])" \
    .kernelstitch/runs.sqlite "$OUT/runs.sqlite" || echo "no run store to return"
grep -E "^- (correct|geomean)|^\| (all|level[0-9]+) \|" "$OUT/bench/results.md" 2>/dev/null
echo "script used $((SECONDS - start)) s"
