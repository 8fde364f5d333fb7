# 2x1 and 4x1 renders of the same wgmma configuration through `hgemm eval` (checked, both modes, the libraries
# alongside), once each. Usage: cluster4.sh OUTDIR [mid|small|lib], from the repository root with hgemm installed.
# mid (gpu-h100/cluster4-mid.log): three defaults with 128-row tiles. small (gpu-h200/cluster4-small-lib.log): four
# small-M shapes in the swapped form (the small operand is the shared Bt tile), as the library runs 16x4608x3584
# in 4x1 clusters; widths a multiple of 32 so that a quarter of the tile is whole swizzle groups. lib: the tile of
# cuBLASLt's autotuned kernel at 1000x1408x2048 (128 rows by 96 columns, 6 stages, four CTAs along M sharing the
# Bt tile: nvjet_sm90_hsh_96x128_64x6_1x4 in the library's column-major terms), ping-pong and cooperative, and
# the 1024^3 default (the README's demo).
set -u
OUT=$1
SET=${2:-mid}
E=experiments/2026-11-28-smem-fill
. $E/eval_pair.sh
if [ "$SET" = mid ]; then
  CONFIGS=("1000 1408 2048" "1000 4608 3584" "4096 4096 4096")
elif [ "$SET" = lib ]; then
  CONFIGS=("1000 1408 2048 bn=96 stages=6" "1000 1408 2048 bn=96 stages=6 pingpong=0" "1024 1024 1024")
else
  SW="swap_ab=1 bm=64 consumers=1 pingpong=0 epilogue=0 split_k=1"
  CONFIGS=("16 4608 3584 $SW bn=32 warp_producer=1 stage_k=128 stages=8" "128 4608 3584 $SW bn=128"
           "77 5120 5120 $SW bn=96 stages=10" "64 4096 16384 $SW bn=32 stages=16")
fi
for i in "${!CONFIGS[@]}"; do
  set -- ${CONFIGS[$i]}
  python3 -P $E/cluster4.py "$1" "$2" "$3" "$OUT/k" "${@:4}"
  for v in base cluster4; do
    eval_one "$OUT/k/$v-$1x$2x$3.cu" $1 $2 $3 "$OUT/eval-$v-$1x$2x$3-$i.json" "$v" "$OUT/cluster4-$SET.log"
  done
done
