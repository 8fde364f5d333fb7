# The probe, then the A-by-cp.async copies of three wgmma kernels against their renders through `hgemm eval`
# (checked, both modes, the libraries alongside), each pair twice in alternation. Usage: run.sh OUTDIR, from the
# repository root with hgemm installed and nvcc on the PATH.
set -u
OUT=$1
E=experiments/2026-11-28-smem-fill
nvcc -O3 -std=c++17 -arch=sm_90a -Ievaluator/kernels $E/probe.cu -o "$OUT/probe" && timeout 150 "$OUT/probe" "$OUT/smem-fill.json" | tee "$OUT/probe.log"
python3 -P $E/a_cpasync.py 1024 1024 1024 "$OUT/k"
python3 -P $E/a_cpasync.py 512 512 2048 "$OUT/k" bm=64 bn=64 split_k=1 stage_k=64 cluster_m=1 warp_producer=1
python3 -P $E/a_cpasync.py 128 4608 3584 "$OUT/k"
for rep in 1 2; do
  for shape in "1024 1024 1024" "512 512 2048" "128 4608 3584"; do
    set -- $shape
    for v in base a_cpasync; do
      python3 -P -c 'from hgemm.agent.cli import main; main()' eval "$OUT/k/$v-$1x$2x$3.cu" $1 $2 $3 --json \
        > "$OUT/eval-$v-$1x$2x$3-$rep.json"
      python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
line = [sys.argv[2], sys.argv[3], 'ok' if r.get('correct') else str(r.get('failure_kind'))]
for m, d in r.get('modes', {}).items():
    c = d['candidate']['median_us'] if d.get('candidate') else float('nan')
    line.append(f\"{m} {c:.2f} us (best library {min(s['median_us'] for s in d['baselines'].values()):.2f})\")
print('  '.join(line))" "$OUT/eval-$v-$1x$2x$3-$rep.json" "$v" "$1x$2x$3" | tee -a "$OUT/eval.log"
    done
  done
done
