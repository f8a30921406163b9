#!/usr/bin/env bash
# joeynmt 2.3 for the side-by-side benchmark, in its own folder (never a dependency of the project):
# its package pins protobuf < 3.21 and lint tools, so it goes in with --no-deps plus what it imports.
set -euo pipefail
cd "$(dirname "$0")"
python -m pip install -q --no-deps --target .joeynmt joeynmt==2.3.0 tensorboard absl-py markdown \
    tensorboard-data-server subword-nmt sentencepiece
echo "joeynmt installed in $(pwd)/.joeynmt (benchmarks/throughput.py finds it there)"
