#!/bin/sh
# Writes every output pipeplan makes from the shipped examples into one folder, so that two
# builds can be compared byte for byte (`diff -r`): a refactor that must not change any plan
# (docs/hacking.md) is checked by running this with the old and the new binary.
#
# Usage: tests/corpus/plan_corpus.sh PIPEPLAN OUTPUT_DIR
#   Plans every example model on every example topology with every planner and schedule
#   policy, simulates each plan (--json), exports each spp plan in every format, and runs
#   compare --no-timing, then the large-model examples of examples/*/llm (spec 8). Exit codes
#   are recorded next to the outputs (an infeasible pair is part of the corpus, not a failure).
#   Takes about a minute with a release build.
#   Outputs are named relative to OUTPUT_DIR (the script runs there), so that messages which
#   name a plan file read the same whichever folder two corpora are written to
#   (tests/corpus/check_determinism.sh checks it). Ends by saying how many files it wrote.
#   PLAN_CORPUS_MODELS and PLAN_CORPUS_TOPOLOGIES (names without .json, separated by spaces)
#   restrict it to those examples, for a quick corpus; unset, every example is in it.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
case $1 in /*) bin=$1 ;; */*) bin=$(pwd)/$1 ;; *) bin=$(command -v "$1") ;; esac
dir=$2
mkdir -p "$dir"
cd "$dir" || exit 2
out=.

# selected NAME LIST: whether NAME is one of the space-separated LIST (an empty LIST has all).
selected() {
  [ -z "$2" ] && return 0
  case " $2 " in *" $1 "*) return 0 ;; esac
  return 1
}
models_wanted=${PLAN_CORPUS_MODELS:-}
topologies_wanted=${PLAN_CORPUS_TOPOLOGIES:-}
planners="spp gpipe pipedream uniform data-parallel"
policies="default list 1f1b gpipe"
for topo_file in "$root"/examples/topologies/*.json; do
  topo=$(basename "$topo_file" .json)
  selected "$topo" "$topologies_wanted" || continue
  for model_file in "$root"/examples/models/*.json; do
    model=$(basename "$model_file" .json)
    selected "$model" "$models_wanted" || continue
    for planner in $planners; do
      for policy in $policies; do
        name=$model.$topo.$planner.$policy
        set -- plan "$model_file" "$topo_file" --planner "$planner" -q -o "$out/$name.plan.json"
        [ "$policy" = default ] || set -- "$@" --schedule "$policy"
        rc=0
        "$bin" "$@" 2> "$out/$name.plan.err" || rc=$?
        echo "$rc" > "$out/$name.plan.rc"
        [ "$rc" -eq 0 ] || continue
        "$bin" -q simulate "$out/$name.plan.json" "$model_file" "$topo_file" --json \
          > "$out/$name.simulate.json" 2>&1 || echo "simulate failed: $?" >> "$out/$name.simulate.json"
        if [ "$planner" = spp ] && [ "$policy" = default ]; then
          for format in chrome-trace svg html ranks torch-split megatron deepspeed torch-schedule; do
            "$bin" -q export "$out/$name.plan.json" --format "$format" --model "$model_file" \
              --topology "$topo_file" > "$out/$name.export.$format" 2>&1 || echo "exit $?" >> "$out/$name.export.$format"
          done
          for format in chrome-trace svg html; do
            "$bin" -q export "$out/$name.plan.json" --format "$format" \
              > "$out/$name.export-alone.$format" 2>&1 || echo "exit $?" >> "$out/$name.export-alone.$format"
          done
        fi
      done
    done
    "$bin" -q compare "$model_file" "$topo_file" --no-timing --format json \
      > "$out/$model.$topo.compare.json" 2>&1 || echo "exit $?" >> "$out/$model.$topo.compare.json"
  done
done

# Spec 8: the large-model examples (examples/models/llm on examples/topologies/llm) with spp
# free, --uniform, with each recomputation and optimizer setting, and the megatron planner at
# the degrees that fit, plus every export of the default plan.
for topo_file in "$root"/examples/topologies/llm/*.json; do
  topo=$(basename "$topo_file" .json)
  selected "$topo" "$topologies_wanted" || continue
  for model_file in "$root"/examples/models/llm/*.json; do
    model=$(basename "$model_file" .json)
    selected "$model" "$models_wanted" || continue
    for options in "" "--uniform" "--recompute never" "--recompute always" "--shard-optimizer" \
        "--tensor-parallel 1" "--schedule 1f1b" \
        "--planner megatron --tensor-parallel 4 --pipeline-parallel 2" \
        "--planner megatron --tensor-parallel 8 --pipeline-parallel 2 --recompute always"; do
      variant=$(printf '%s' "$options" | tr -cs 'a-z0-9' '_' | sed 's/^_//; s/_$//')
      name=$model.$topo.${variant:-default}
      rc=0
      # shellcheck disable=SC2086
      "$bin" plan "$model_file" "$topo_file" $options -q -o "$out/$name.plan.json" \
        2> "$out/$name.plan.err" || rc=$?
      echo "$rc" > "$out/$name.plan.rc"
      [ "$rc" -eq 0 ] || continue
      "$bin" -q simulate "$out/$name.plan.json" "$model_file" "$topo_file" --json \
        > "$out/$name.simulate.json" 2>&1 || echo "simulate failed: $?" >> "$out/$name.simulate.json"
      if [ -z "$options" ]; then
        for format in chrome-trace svg html ranks torch-split megatron deepspeed torch-schedule; do
          "$bin" -q export "$out/$name.plan.json" --format "$format" --model "$model_file" \
            --topology "$topo_file" > "$out/$name.export.$format" 2>&1 || echo "exit $?" >> "$out/$name.export.$format"
        done
      fi
    done
  done
done

echo "plan_corpus.sh: $(find . -type f | wc -l | tr -d " ") files in $dir" >&2
