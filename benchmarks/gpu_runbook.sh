#!/usr/bin/env bash
# Issue #42's GPU measurement in one command, at most 9 minutes on a fresh H100 (docs/benchmarks.md says how to run
# it through the device tool):
#
#   bash benchmarks/gpu_runbook.sh             # on the GPU machine; results in $OUT (else ./runbook-out)
#   bash benchmarks/gpu_runbook.sh --dry-run   # tiny sizes on the CPU, every step (tests/unit/test_benchmarks.py)
#
# Steps, each bounded by `timeout` and by what is left of RUNBOOK_SECONDS (540): the environment; joeynmt for this
# machine's own Python (from benchmarks/.wheels/py312, carried along: bash benchmarks/install_joeynmt.sh --download
# benchmarks/.wheels/py312 3.12); the CUDA equality, sync, dropout and capture tests (tests/oracles/test_device_path.py,
# 4 processes); paper-size training and beam-10 decoding of the baseline and SACT, eager, compiled and captured
# (model.compile default and graphs; the captured rows before Inductor's, which compile for a minute), with joeynmt
# in the same run; the Transformer at base size with joeynmt's; 1, 4, 8 packed trials of captured SACT (the mode the
# GPU spaces use) without and with MPS, with each trial's peak memory; last, the per-position CUDA graph trees of
# reduce-overhead against eager. After every step OUT holds results.json (every step's JSON) and summary.md (one
# markdown table), and runbook.log the whole output: a step that fails or runs out of time leaves the earlier ones'
# results. No step trains on a real corpus (synthetic batches and the generated `synthetic` corpus), so no corpus
# cache is needed. First run on an H100: 390 s of its 540 (docs/benchmarks.md).
set -uo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=${RUNBOOK_DRY_RUN:-0}
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
OUT=${OUT:-$PWD/runbook-out}
mkdir -p "$OUT"
LOG=$OUT/runbook.log
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
export DRY_RUN WORK PYTHON PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
START=$SECONDS
: > "$LOG"

if [ "$DRY_RUN" = 1 ]; then  # the same steps at the smoke tests' sizes on the CPU, one thread, limits 10x as long:
    DEVICE=cpu SIZE=tiny TRANSFORMER_SIZE=tiny STEPS=1 ROUNDS=1 DECODE=1 MODES=(graphs) SLACK=10  # a slow machine
    PACKING=(--device cpu --size tiny --compile-mode graphs --trials 1 2 --seconds 1 --mps off)  # is no failure
    THREADS=(--threads 1) TEST_WORKERS=""
else
    DEVICE=cuda SIZE=paper TRANSFORMER_SIZE=paper STEPS=10 ROUNDS=2 DECODE=2 MODES=(graphs default) SLACK=1
    PACKING=(--device cuda --size paper --compile-mode graphs --trials 1 4 8 --seconds 6 --mps both)
    THREADS=() TEST_WORKERS=4  # the CUDA tests in 4 processes: 58 of them took 25 s so on an H100, 90 took 106 s alone
fi
BUDGET=${RUNBOOK_SECONDS:-$((540 * SLACK))}
export TEST_WORKERS

report() {
    "$PYTHON" benchmarks/runbook_report.py report "$WORK" "$OUT" >> "$LOG" 2>&1
}

step() {  # step NAME CAP COMMAND...: COMMAND (a program or a function below) for at most CAP seconds, less if
    local name=$1 cap=$2 left limit began code  # the budget is nearly spent; its exit code is step's
    shift 2
    left=$((BUDGET - (SECONDS - START)))
    cap=$((cap * SLACK))
    limit=$((cap < left ? cap : left))
    if [ "$limit" -lt 10 ]; then
        echo "{\"name\": \"$name\", \"code\": -1, \"seconds\": 0, \"limit\": 0}" >> "$WORK/steps.jsonl"
        report
        return 1
    fi
    echo "== $name (at most ${limit}s): $*" >> "$LOG"
    began=$SECONDS
    timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >> "$LOG" 2>&1
    code=$?
    echo "{\"name\": \"$name\", \"code\": $code, \"seconds\": $((SECONDS - began)), \"limit\": $limit}" \
        >> "$WORK/steps.jsonl"
    echo "== $name: exit $code after $((SECONDS - began))s" >> "$LOG"
    report
    return $code
}

environment() {
    nvidia-smi || echo "nvidia-smi: not available"
    "$PYTHON" benchmarks/runbook_report.py env > "$WORK/env.json"
}

cuda_tests() {  # -v: one line per test as it finishes, so that a run cut short still counts what it did
    "$PYTHON" -m pytest -v -p no:cacheprovider -o addopts= ${TEST_WORKERS:+-n "$TEST_WORKERS"} tests/oracles/test_device_path.py \
        -k "cuda or captured or replayed or graphed or dropout or reduce_overhead or never_waits or collector" \
        > "$WORK/cuda_tests.log" 2>&1
    local code=$?
    cat "$WORK/cuda_tests.log"
    "$PYTHON" benchmarks/runbook_report.py tests "$WORK/cuda_tests.log" > "$WORK/cuda_tests.json"
    return $code
}

install_joeynmt() {  # offline from the wheels carried for this Python (benchmarks/.wheels/py312), else from PyPI;
    local tag wheels  # a dry run keeps a joeynmt already installed for this Python (no network needed then)
    tag=$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
    wheels=benchmarks/.wheels/$tag
    if [ "$DRY_RUN" = 1 ] && "$PYTHON" -c "import sys; sys.path.insert(0, 'benchmarks/.joeynmt/$tag'); import joeynmt.model"
    then
        echo "joeynmt is installed for this Python already"
    elif [ -d "$wheels" ]; then
        bash benchmarks/install_joeynmt.sh --wheels "$wheels"
    else
        bash benchmarks/install_joeynmt.sh
    fi
}
export -f environment cuda_tests install_joeynmt

JOEYNMT=()
step environment 20 environment
step joeynmt 20 install_joeynmt && JOEYNMT=(--joeynmt)  # then throughput.py fails loudly if joeynmt breaks
step cuda_tests 100 cuda_tests
step rnn 160 "$PYTHON" benchmarks/throughput.py --device "$DEVICE" --size "$SIZE" --variants none sact \
    --compile --compile-mode "${MODES[@]}" --buckets 5 --steps "$STEPS" --rounds "$ROUNDS" \
    --decode-batches "$DECODE" "${JOEYNMT[@]}" "${THREADS[@]}" --json "$WORK/rnn.json"
step transformer 45 "$PYTHON" benchmarks/throughput.py --arch transformer --device "$DEVICE" \
    --size "$TRANSFORMER_SIZE" --variants none sact_query --steps "$((STEPS < 5 ? STEPS : 5))" --rounds "$ROUNDS" \
    --decode-batches 1 --decode-batch-size 16 "${JOEYNMT[@]}" "${THREADS[@]}" --json "$WORK/transformer.json"
step packing 150 "$PYTHON" benchmarks/packing.py "${PACKING[@]}" --json "$WORK/packing.json"
if [ "$DRY_RUN" = 1 ]; then  # Inductor compiles for minutes on a CPU: the dry run leaves this step out
    echo "== reduce_overhead: left out of the dry run" >> "$LOG"
else
    step reduce_overhead 100 "$PYTHON" benchmarks/throughput.py --device cuda --size paper --variants none \
        --compile --compile-mode reduce-overhead --buckets 5 --steps 10 --rounds 1 --decode-batches 1 \
        --json "$WORK/reduce_overhead.json"
fi
report
cat "$OUT/summary.md"
echo "runbook: $((SECONDS - START))s; results in $OUT (results.json, summary.md, runbook.log)"
