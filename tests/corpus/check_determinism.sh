#!/bin/sh
# The corpus of plan_corpus.sh does not depend on the folder it is written to: a quick corpus
# (gnmt on the PCIe server, whose refused exports name their plan file in their message) written
# twice, once to WORK_DIR/first by absolute path and once to a relative path one folder deeper,
# must be the same, byte for byte (`diff -r` prints nothing). docs/hacking.md's recipe for
# proving a refactor changed nothing relies on it.
#
# Usage: tests/corpus/check_determinism.sh PIPEPLAN WORK_DIR   (WORK_DIR is emptied first)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
case $1 in /*) bin=$1 ;; *) bin=$(pwd)/$1 ;; esac
rm -rf "$2"
mkdir -p "$2/deeper"
work=$(cd "$2" && pwd)
export PLAN_CORPUS_MODELS=gnmt PLAN_CORPUS_TOPOLOGIES=pcie-server
"$here/plan_corpus.sh" "$bin" "$work/first"
(cd "$work/deeper" && "$here/plan_corpus.sh" "$bin" second)
# The case that once differed: a refused export's message names the plan file.
grep -q '^pipeplan: error: \./gnmt\.pcie-server\.spp\.default\.plan\.json: ' \
  "$work/first/gnmt.pcie-server.spp.default.export.megatron"
diff -r "$work/first" "$work/deeper/second"
rm -rf "$work"
echo "check_determinism.sh: the two corpora are the same"
