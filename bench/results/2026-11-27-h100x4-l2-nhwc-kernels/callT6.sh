#!/usr/bin/env bash
# Call 6 (fifteenth session, 1 x H100): the channels-last elementwise kernel restored to its
# first rewrite (tiles along S), timed by scripts/_nhwc_ab.py; then why level2/93's faster
# variants fail verification (its delivered program is the CUDA-graph one, 0.9 ms slower).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
timeout 150 python scripts/_nhwc_ab.py >"$OUT/ab.txt" 2>&1
echo "ab exit $? at $((SECONDS - start)) s"; cat "$OUT/ab.txt"
mkdir -p /tmp/g93 && cp .kb/kernelbench/level2/93_ConvTranspose2d_Add_Min_GELU_Multiply.py /tmp/g93/p.py
(cd /tmp/g93 && timeout 300 kernelstitch generate p.py --json >"$OUT/gen93.json" 2>"$OUT/gen93.err")
echo "generate exit $? at $((SECONDS - start)) s"
python - "$OUT/gen93.json" <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
def walk(o, path=""):
    if isinstance(o, dict):
        if "name" in o and ("note" in o or "verdict" in o):
            print(" ", o.get("name"), "|", o.get("note"), "|", str(o.get("verdict"))[:300])
        for k, v in o.items():
            walk(v, path + "." + k)
    elif isinstance(o, list):
        for v in o: walk(v, path)
walk(d)
print("status:", d.get("status"), str(d.get("message"))[:300])
P
R=$(ls /tmp/g93/.kernelstitch/p/Model/report.md 2>/dev/null) && cp "$R" "$OUT/report93.md" && grep -iE "ndhwc|default|graph|reject|fail" "$R" | head -30
V=/tmp/g93/.kernelstitch/p/Model/variants/ndhwc/model_new.py
[ -f "$V" ] && timeout $((580 - (SECONDS - start))) kernelstitch verify /tmp/g93/p.py "$V" --json >"$OUT/verify_ndhwc.json" 2>"$OUT/verify_ndhwc.err"
echo "verify exit $? at $((SECONDS - start)) s"
python - "$OUT/verify_ndhwc.json" <<'P' 2>/dev/null
import json, sys
v = json.load(open(sys.argv[1]))
print("verdict:", v.get("status"), [(r.get("code"), str(r.get("message"))[:400]) for r in v.get("reasons", [])])
for c in v.get("checks", []):
    if not c.get("passed"):
        print("  failed check:", c.get("name"), c.get("seed"), c.get("shapes"), [str(f)[:400] for f in c.get("failures", [])][:3])
P
echo "script used $((SECONDS - start)) s"
