# The two runs of this folder, on one host with two GPUs, the package and its GPU extras installed.
# RUN=1: --gpus 0 (T1 s at most); RUN=2: --gpus all, the GPU 1 worker killed with SIGKILL after KILL_AT s.
set -u
RUN=${RUN:-both}; D=${D:-$PWD/out}; R=$PWD
SEED=$R/bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz
mkdir -p $D; cp $R/experiments/2026-11-25-h200x2-scaling/shapes64.txt $D/shapes64.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $D/gpus.txt
G="--grid $D/shapes64.txt --budget-evals 8 --import-archive $SEED"
util() { nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -l 1 > $1 2>/dev/null & echo $!; }
if [ $RUN = 1 ] || [ $RUN = both ]; then
  u=$(util $D/util-1gpu.csv)
  HGEMM_HOME=$D/home1 timeout -s TERM ${T1:-555} hgemm sweep $G --gpus 0 --name scale-1gpu --out $D \
    --export-archive $D/1gpu.jsonl.xz > $D/1gpu.log 2>&1; kill $u
fi
if [ $RUN = 2 ] || [ $RUN = both ]; then
  u=$(util $D/util-2gpu-kill.csv)
  HGEMM_HOME=$D/home2 timeout -s TERM ${T2:-400} hgemm sweep $G --gpus all --name scale-2gpu-kill --out $D \
    --export-archive $D/2gpu.jsonl.xz > $D/2gpu-kill.log 2>&1 & drv=$!
  sleep ${KILL_AT:-60}
  # the GPU 1 worker's pid, as the driver printed it: "gpu1 (CUDA_VISIBLE_DEVICES=1, pid N)"
  p=$(grep -o "CUDA_VISIBLE_DEVICES=1, pid [0-9]*" $D/2gpu-kill.log | head -1 | awk '{print $3}')
  echo "$(date +%s) $(ps -o pid,ppid,args -p $p | tail -1 | cut -c1-140)" > $D/killed.txt; kill -9 $p
  wait $drv; kill $u
fi
