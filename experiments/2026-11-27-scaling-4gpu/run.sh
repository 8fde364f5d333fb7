# One host with four GPUs, the package and its GPU extras installed; run from the repository root.
# SHAPES: a shape file instead of shapes64.txt. RUN=1: the 64-shape sweep with --gpus 0; RUN=all: the same with --gpus all. Each from a fresh HGEMM_HOME with the
# seed archive imported; its log, report, exported archive and nvidia-smi samples go to D/RUN, the folder
# `python -m hgemm.bench.scaling_report D/1 D/all --name NAME` reads.
set -u
RUN=${RUN:-1}; D=${D:-$PWD/out}/$RUN; R=$PWD
SEED=$R/bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz
mkdir -p $D; W=$(mktemp -d)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $D/gpus.txt
nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -l 1 > $D/util-$RUN.csv 2>/dev/null &
u=$!
# from outside the repository, so that the installed package is the one imported
(cd $W && HGEMM_HOME=$D/home timeout -s TERM ${T:-570} hgemm sweep \
  --grid ${SHAPES:-$R/experiments/2026-11-27-scaling-4gpu/shapes64.txt} --budget-evals 8 --import-archive $SEED \
  --gpus $([ $RUN = 1 ] && echo 0 || echo all) --name scale-$RUN --out $D --export-archive $D/$RUN.jsonl.xz \
  > $D/$RUN.log 2>&1; echo "rc=$? wall=$SECONDS" >> $D/$RUN.log)
kill $u
