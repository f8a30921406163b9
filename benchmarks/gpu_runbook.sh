#!/usr/bin/env bash
# Issue #42's GPU measurement in one command, at most 9 minutes on a fresh GPU machine (docs/benchmarks.md says how
# to run it through the device tool, and where to commit what it writes):
#
#   bash benchmarks/gpu_runbook.sh             # on the GPU machine; results in $OUT (else ./runbook-out)
#   bash benchmarks/gpu_runbook.sh --dry-run   # tiny sizes on the CPU, every step (tests/unit/test_benchmarks.py)
#
# First, in its first seconds, it checks what it needs and stops with one line (exit 2) if CUDA is not visible or
# joeynmt's wheels for this machine's Python were not carried (bash benchmarks/install_joeynmt.sh --download
# benchmarks/.wheels/py312 3.12). Then the steps, in the order of what decides issue #42's goals, each bounded by
# `timeout` and by what is left of RUNBOOK_SECONDS (540; their caps add up to 500): the environment; joeynmt,
# offline from the carried wheels; the RNN at paper size, baseline and SACT, eager and captured (`graphs`), with
# joeynmt in the same run: one trial's training and its greedy and beam-10 decoding; 1 trial, then 8 and 4 packed
# trials of captured SACT under CUDA MPS, then without it, each with its peak memory; the Transformer at base size
# with joeynmt's; last, the CUDA tests (tests/oracles/test_device_path.py, 4 processes, or one when pytest-xdist is
# missing), under a limit of their own that leaves time to count them. Inductor's modes, measured on the H100
# (0.11x and 1.07x the eager step), are not measured again. A step that fails or runs out of time leaves the
# earlier steps' figures, and a contender or packing row that fails leaves an error row and the rows before it.
# After every step OUT holds results.json (every step's JSON), summary.md (one markdown table), runbook.log (the
# whole output) and cuda_tests.log (the CUDA tests' output, as it is written). No step trains on a real corpus
# (synthetic batches), so no corpus cache is needed. RUNBOOK_STEPS (names, space-separated) runs some steps only.
set -uo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=${RUNBOOK_DRY_RUN:-0}
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
OUT=${OUT:-$PWD/runbook-out}
mkdir -p "$OUT"
LOG=$OUT/runbook.log
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
CUDA_TESTS=${RUNBOOK_TESTS:-tests/oracles/test_device_path.py}
STEPS=" ${RUNBOOK_STEPS:-environment joeynmt rnn packing transformer cuda_tests} "
export DRY_RUN WORK PYTHON OUT CUDA_TESTS PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
START=$SECONDS
: > "$LOG"
rm -f "$OUT/cuda_tests.log"

if [ "$DRY_RUN" = 1 ]; then  # the same steps at the smoke tests' sizes on the CPU, one thread, limits 10x as long:
    DEVICE=cpu SIZE=tiny TRANSFORMER_SIZE=tiny TRAIN_STEPS=1 ROUNDS=1 DECODE=1 SLACK=10  # a slow machine is no failure
    PACKING=(--device cpu --size tiny --compile-mode graphs --trials 1 2 --seconds 1 --mps off)
    THREADS=(--threads 1) TEST_WORKERS=""
else
    DEVICE=cuda SIZE=paper TRANSFORMER_SIZE=paper TRAIN_STEPS=10 ROUNDS=2 DECODE=2 SLACK=1
    PACKING=(--device cuda --size paper --compile-mode graphs --trials 1 8 4 --seconds 6 --mps both)
    THREADS=() TEST_WORKERS=4  # the CUDA tests in 4 processes: 58 of them took 25 s so on an H100, 90 took 106 s alone
fi
BUDGET=${RUNBOOK_SECONDS:-$((540 * SLACK))}
export TEST_WORKERS

abort() {  # one line, on the console and in the log, before any step has run
    echo "gpu_runbook.sh: $*" | tee -a "$LOG" >&2
    exit 2
}

preflight() {  # what the steps need, checked in seconds: CUDA (not in a dry run) and joeynmt's carried wheels
    local tag
    tag=$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")') \
        || abort "$PYTHON does not run"
    if [ "$DRY_RUN" != 1 ]; then
        "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
            || abort "no CUDA device is visible to $PYTHON (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}):" \
                "nothing to measure; --dry-run runs the steps on the CPU"
        case "$STEPS" in *" joeynmt "*) [ -d "benchmarks/.wheels/$tag" ] || abort "joeynmt's wheels for this" \
            "Python are missing: benchmarks/.wheels/$tag (fetch them where pip works: bash benchmarks/install_joeynmt.sh" \
            "--download benchmarks/.wheels/$tag $("$PYTHON" -c 'import sys; print(sys.version[:4])'), then carry" \
            "benchmarks/.wheels)";;
        esac
    fi
    echo "preflight: $PYTHON ($tag), CUDA visible or a dry run, steps:$STEPS" >> "$LOG"
}

report() {
    "$PYTHON" benchmarks/runbook_report.py report "$WORK" "$OUT" >> "$LOG" 2>&1
}

step() {  # step NAME CAP COMMAND...: COMMAND (a program or a function below) for at most CAP seconds, less if
    local name=$1 cap=$2 left limit began code  # the budget is nearly spent; its exit code is step's
    shift 2
    case "$STEPS" in *" $name "*) ;; *) return 0;; esac
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
    STEP_LIMIT=$limit timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >> "$LOG" 2>&1
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

cuda_tests() {  # -v: one line per test as it ends, into OUT, so that a run cut short still counts what it did;
    local workers=() code  # pytest's own limit ends it 15 s before the step's, which would kill the whole group
    if [ -n "$TEST_WORKERS" ] && "$PYTHON" -c "import xdist" 2> /dev/null; then
        workers=(-n "$TEST_WORKERS")
    elif [ -n "$TEST_WORKERS" ]; then
        echo "pytest-xdist does not import: the CUDA tests run in one process"
    fi
    timeout --kill-after=5 $((STEP_LIMIT - 15)) "$PYTHON" -m pytest -v -p no:cacheprovider -o addopts= \
        "${workers[@]}" "$CUDA_TESTS" -k "cuda or captured or replayed or graphed or dropout or reduce_overhead or \
never_waits or collector or fused" > "$OUT/cuda_tests.log" 2>&1
    code=$?
    [ "$code" = 124 ] && echo "cuda_tests: stopped by its limit of $((STEP_LIMIT - 15))s" | tee -a "$OUT/cuda_tests.log"
    tail -n 40 "$OUT/cuda_tests.log"
    if [ "$DRY_RUN" != 1 ] && [ "$code" = 0 ] && ! grep -q " PASSED" "$OUT/cuda_tests.log"; then
        echo "cuda_tests: none passed on a CUDA machine (every test skipped?)"
        return 1
    fi
    return $code
}

install_joeynmt() {  # offline from the wheels carried for this Python (benchmarks/.wheels/py312); a dry run keeps a
    local tag wheels  # joeynmt already installed for this Python, else installs it from PyPI
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

preflight
JOEYNMT=()
step environment 15 environment
step joeynmt 20 install_joeynmt && [[ $STEPS == *" joeynmt "* ]] && JOEYNMT=(--joeynmt)  # then throughput.py fails loudly if it breaks
step rnn 150 "$PYTHON" benchmarks/throughput.py --device "$DEVICE" --size "$SIZE" --variants none sact \
    --compile --compile-mode graphs --buckets 5 --steps "$TRAIN_STEPS" --rounds "$ROUNDS" \
    --decode-batches "$DECODE" "${JOEYNMT[@]}" "${THREADS[@]}" --json "$WORK/rnn.json"
step packing 130 "$PYTHON" benchmarks/packing.py "${PACKING[@]}" --json "$WORK/packing.json"
step transformer 45 "$PYTHON" benchmarks/throughput.py --arch transformer --device "$DEVICE" \
    --size "$TRANSFORMER_SIZE" --variants none sact_query --steps "$((TRAIN_STEPS < 5 ? TRAIN_STEPS : 5))" \
    --rounds "$ROUNDS" --decode-batches 1 --decode-batch-size 16 "${JOEYNMT[@]}" "${THREADS[@]}" \
    --json "$WORK/transformer.json"
step cuda_tests 140 cuda_tests
report
cat "$OUT/summary.md"
echo "runbook: $((SECONDS - START))s; results in $OUT (results.json, summary.md, runbook.log, cuda_tests.log)"
