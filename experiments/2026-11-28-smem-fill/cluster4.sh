# The 4x1-cluster copies of three wgmma defaults against their renders through `hgemm eval` (checked, both modes,
# the libraries alongside), once each. Usage: cluster4.sh OUTDIR, from the repository root with hgemm installed.
set -u
OUT=$1
E=experiments/2026-11-28-smem-fill
for shape in "1000 1408 2048" "1000 4608 3584" "4096 4096 4096"; do
  set -- $shape
  python3 -P $E/cluster4.py $1 $2 $3 "$OUT/k"
  for v in base cluster4; do
    python3 -P -c 'from hgemm.agent.cli import main; main()' eval "$OUT/k/$v-$1x$2x$3.cu" $1 $2 $3 --json \
      > "$OUT/eval-$v-$1x$2x$3.json"
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
line = [sys.argv[2], sys.argv[3], 'ok' if r.get('correct') else str(r.get('failure_kind'))]
for m, d in r.get('modes', {}).items():
    c = d['candidate']['median_us'] if d.get('candidate') else float('nan')
    line.append(f\"{m} {c:.2f} us (best library {min(s['median_us'] for s in d['baselines'].values()):.2f})\")
print('  '.join(line))" "$OUT/eval-$v-$1x$2x$3.json" "$v" "$1x$2x$3" | tee -a "$OUT/cluster4.log"
  done
done
