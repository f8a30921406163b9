#!/usr/bin/env bash
# joeynmt 2.3 for the side-by-side benchmark, in its own folder (never a dependency of the project):
# its package pins protobuf < 3.21 and lint tools, so it goes in with --no-deps plus what it imports, each pinned:
# CI runs it, so a new release of any of them must not change what CI tests.
#
#   bash benchmarks/install_joeynmt.sh                        # from PyPI, for the `python` on PATH ($PYTHON to pick)
#   bash benchmarks/install_joeynmt.sh --download DIR [3.12]  # fetch the wheels for a Python 3.12 machine into DIR
#   bash benchmarks/install_joeynmt.sh --wheels DIR           # install from DIR, offline (the GPU runbook does)
#
# Each Python gets its own folder, benchmarks/.joeynmt/py<major><minor>: sentencepiece is compiled for one Python
# version, and a folder built by another Python once shadowed the GPU image's own packages, so that joeynmt did
# not import there. benchmarks/throughput.py reads the folder of the Python it runs in.
set -euo pipefail
if [ "${1:-}" = "--download" ] || [ "${1:-}" = "--wheels" ]; then
    DIR=$(realpath -m "${2:?usage: install_joeynmt.sh $1 DIR}")  # from the caller's folder, before the cd below
fi
cd "$(dirname "$0")"
PACKAGES=(joeynmt==2.3.0 tensorboard==2.21.0 absl-py==2.5.1 markdown==3.11.3 tensorboard-data-server==0.7.2
    subword-nmt==0.3.8 sentencepiece==0.2.3 importlib-metadata==9.1.0 zipp==4.1.2)  # the GPU image lacks the last two
PYTHON=${PYTHON:-python}
if [ "${1:-}" = "--download" ]; then
    version=${3:-3.12}
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 --platform any -d "$DIR" "${PACKAGES[@]}"
    echo "wheels of joeynmt and its imports for Python $version in $DIR"
    exit 0
fi
target=.joeynmt/$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
offline=()
if [ "${1:-}" = "--wheels" ]; then
    offline=(--no-index --find-links "$DIR")
fi
"$PYTHON" -m pip install -q --no-deps --upgrade --target "$target" "${offline[@]}" "${PACKAGES[@]}"
"$PYTHON" -c "import sys; sys.path.insert(0, '$target'); import joeynmt.model" \
    || { echo "install_joeynmt.sh: joeynmt installed in $(pwd)/$target does not import" >&2; exit 1; }
echo "joeynmt installed in $(pwd)/$target (benchmarks/throughput.py finds it there)"
