# The 4x1-cluster copies of three wgmma defaults against their renders through `hgemm eval` (checked, both modes,
# the libraries alongside), once each. Usage: cluster4.sh OUTDIR, from the repository root with hgemm installed.
set -u
OUT=$1
E=experiments/2026-11-28-smem-fill
. $E/eval_pair.sh
for shape in "1000 1408 2048" "1000 4608 3584" "4096 4096 4096"; do
  set -- $shape
  python3 -P $E/cluster4.py $1 $2 $3 "$OUT/k"
  for v in base cluster4; do
    eval_one "$OUT/k/$v-$1x$2x$3.cu" $1 $2 $3 "$OUT/eval-$v-$1x$2x$3.json" "$v" "$OUT/cluster4.log"
  done
done
