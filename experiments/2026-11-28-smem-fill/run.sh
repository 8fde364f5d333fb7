# The probe, then the A-by-cp.async copies of three wgmma kernels against their renders through `hgemm eval`
# (checked, both modes, the libraries alongside), each pair twice in alternation. Usage: run.sh OUTDIR, from the
# repository root with hgemm installed and nvcc on the PATH.
set -u
OUT=$1
E=experiments/2026-11-28-smem-fill
. $E/eval_pair.sh
nvcc -O3 -std=c++17 -arch=sm_90a -Ievaluator/kernels $E/probe.cu -o "$OUT/probe" && timeout 150 "$OUT/probe" "$OUT/smem-fill.json" | tee "$OUT/probe.log"
python3 -P $E/a_cpasync.py 1024 1024 1024 "$OUT/k"
python3 -P $E/a_cpasync.py 512 512 2048 "$OUT/k" bm=64 bn=64 split_k=1 stage_k=64 cluster_m=1 warp_producer=1
python3 -P $E/a_cpasync.py 128 4608 3584 "$OUT/k"
for rep in 1 2; do
  for shape in "1024 1024 1024" "512 512 2048" "128 4608 3584"; do
    set -- $shape
    for v in base a_cpasync; do
      eval_one "$OUT/k/$v-$1x$2x$3.cu" $1 $2 $3 "$OUT/eval-$v-$1x$2x$3-$rep.json" "$v" "$OUT/eval.log"
    done
  done
done
