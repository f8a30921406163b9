#!/usr/bin/env bash
# joeynmt 2.3 for the side-by-side benchmark, in its own folder (never a dependency of the project):
# its package pins protobuf < 3.21 and lint tools, so it goes in with --no-deps plus what it imports, each pinned:
# CI runs it, so a new release of any of them must not change what CI tests.
set -euo pipefail
cd "$(dirname "$0")"
python -m pip install -q --no-deps --target .joeynmt joeynmt==2.3.0 tensorboard==2.21.0 absl-py==2.5.1 \
    markdown==3.11.3 tensorboard-data-server==0.7.2 subword-nmt==0.3.8 sentencepiece==0.2.3
echo "joeynmt installed in $(pwd)/.joeynmt (benchmarks/throughput.py finds it there)"
