# shapes-real's worst 16 shapes searched again with today's defaults. Usage: run.sh STEP OUTDIR [SECONDS], with
# hgemm installed; gpu-h100/ holds what OUTDIR received.
# Step "before": the report's kernels rendered by today's template, measured again and archived as confirmed,
# so the search starts from them. Step "search": 16 evaluations per shape, --no-resume (the archived kernel
# stays where nothing better is found).
set -u
OUT=$2
E=experiments/2026-11-28-shapes-real-worst
hg() { python3 -P -c 'from hgemm.agent.cli import main; main()' "$@"; }
case "$1" in
before)
  hg archive import bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz
  python3 -P -m hgemm.bench.confirm_report $E/before.json --render --archive --name before-confirmed --out-dir "$OUT" ;;
search)
  [ -f "$E/gpu-h100/search.jsonl.xz" ] && hg archive import "$E/gpu-h100/search.jsonl.xz"
  timeout -s TERM "${3:-3600}" python3 -P -c 'from hgemm.agent.cli import main; main()' sweep --grid $E/worst.txt \
    --budget-evals 16 --no-resume --gpus 0 --name shapes-real-worst-H100 --out "$OUT" \
    --export-archive "$OUT/search.jsonl.xz" ;;
esac
# Step "all": shapes-real's sweep report with these 16 rows merged in (merged-sweep.json), every kernel measured
# again in one run on one GPU; the kernels of the other 51 rows rendered by today's template.
if [ "$1" = all ]; then
  hg archive import bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz
  [ -f "$E/gpu-h100/search.jsonl.xz" ] && hg archive import "$E/gpu-h100/search.jsonl.xz"  # not kept: --render
  python3 -P -m hgemm.bench.confirm_report "$E/merged-sweep.json" --render \
    --name shapes-real-H100-confirmed --out-dir "$OUT"
fi
