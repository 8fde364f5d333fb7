# Does the server-mode flush's reset of persisting L2 lines change server times? The same kernels evaluated in
# server mode, alternating between the evaluator as committed (A) and a copy with the reset calls removed (B).
# Usage: reset_ab.sh SITE OUTDIR, with hgemm installed under SITE (scratch copies are made beside it); writes
# OUTDIR/reset-ab.jsonl. VARIANTS="C A B" adds C: the reset once the GPU is idle, then a device-wide sync.
# Since the fix (Device.reset_l2), A is the evaluator as committed, which resets as C did; C then resets twice.
set -u
SRC=$1; OUTDIR=$2; NORESET=$1-noreset
rm -rf "$NORESET" && cp -r "$SRC" "$NORESET"
sed -i 's/^\( *\)self.rt.reset_persisting_l2()/\1pass/' "$NORESET/hgemm/evaluator/runner.py" "$NORESET/hgemm/evaluator/timing.py"
# C: the reset moved out of the flush to the sync before each sample, with the GPU idle, then a device-wide sync.
EARLY=$1-early
rm -rf "$EARLY" && cp -r "$NORESET" "$EARLY"
python3 - "$EARLY/hgemm/evaluator/runner.py" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = "    def sync(self) -> None:\n        self.rt.stream_sync(self.stream)\n"
assert old in s
s = s.replace(old, old + "        self.rt.reset_persisting_l2()\n        self.rt._call('cudaDeviceSynchronize')\n")
open(p, "w").write(s)
PY
grep -c "reset_persisting_l2()" "$NORESET/hgemm/evaluator/runner.py" "$NORESET/hgemm/evaluator/timing.py"
python3 -P - "$OUTDIR" <<'PY'
import sys
from hgemm.evaluator.kernels import get_family
from hgemm.core.shape import Shape
for fam, (m, n, k) in (("gemv", (1, 1408, 2048)), ("wgmma", (16, 6144, 4096)), ("wgmma", (1024, 1024, 1024))):
    f = get_family(fam)
    open(f"{sys.argv[1]}/k-{m}x{n}x{k}.cu", "w").write(f.render(f.default_params(Shape(m, n, k))))
PY
for rep in 1 2; do
  for v in ${VARIANTS:-A B}; do
    P=$SRC; [ $v = B ] && P=$NORESET; [ $v = C ] && P=$EARLY
    for s in "1 1408 2048" "1024 1024 1024"; do
      set -- $s
      PYTHONPATH=$P:${PYTHONPATH#*:} python3 -P -c 'from hgemm.agent.cli import main; main()' eval "$OUTDIR/k-$1x$2x$3.cu" $1 $2 $3 --mode server --json \
        | python3 -c "import json,sys; r=json.load(sys.stdin); m=r['modes']['server']; print(json.dumps({'v':'$v','rep':$rep,'shape':'$1x$2x$3','us':m['candidate']['median_us'],'base':{b:s['median_us'] for b,s in m['baselines'].items()}}))" \
        | tee -a "$OUTDIR/reset-ab.jsonl"
    done
  done
done
