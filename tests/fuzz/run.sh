#!/usr/bin/env bash
# Runs one libFuzzer target of the `fuzz` preset on its seed corpus.
#   tests/fuzz/run.sh TARGET SECONDS [more libFuzzer flags]
# TARGET is fuzz_model, fuzz_topology, fuzz_plan, fuzz_pipedream, fuzz_plan_end_to_end,
# fuzz_plan_structured or fuzz_model_transformer.
# New inputs go to build/fuzz/corpus/TARGET (never into the repository); a crash, a leak, a
# time-out (10 s for one input) or more than 2 GiB of memory is saved as
# build/fuzz/artifacts/TARGET-*. Exit status 0 means nothing was found.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 TARGET SECONDS [libFuzzer flags]" >&2; exit 2; }
target=$1 seconds=$2
shift 2
case $target in
  fuzz_model) seeds=(tests/fuzz/corpus/model examples/models tests/fuzz/fixtures) dict=json.dict ;;
  fuzz_topology) seeds=(tests/fuzz/corpus/topology examples/topologies tests/fuzz/fixtures) dict=json.dict ;;
  fuzz_plan) seeds=(tests/fuzz/corpus/plan) dict=json.dict ;;
  fuzz_pipedream)
    seeds=(tests/fuzz/corpus/pipedream examples/models/sources/pipedream
           examples/models/sources/dapple tests/data/pipedream) dict=pipedream.dict ;;
  fuzz_plan_end_to_end) seeds=(tests/fuzz/corpus/plan_end_to_end) dict=json.dict ;;
  fuzz_plan_structured) seeds=(tests/fuzz/corpus/plan_structured) dict= ;;
  fuzz_model_transformer) seeds=(tests/fuzz/corpus/model_transformer) dict= ;;
  *) echo "$0: unknown target $target" >&2; exit 2 ;;
esac
binary=build/fuzz/tests/fuzz/$target
[ -x "$binary" ] || { echo "$0: $binary missing: cmake --preset fuzz && cmake --build --preset fuzz" >&2; exit 2; }
work=build/fuzz/corpus/$target
mkdir -p "$work" build/fuzz/artifacts
regressions=()
[ -d "tests/fuzz/regressions/$target" ] && regressions=("tests/fuzz/regressions/$target")
dictionary=()
[ -n "$dict" ] && dictionary=(-dict="tests/fuzz/$dict")
exec "$binary" "$work" "${seeds[@]}" "${regressions[@]}" "${dictionary[@]}" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="build/fuzz/artifacts/$target-" "$@"
