#!/bin/sh
# Checks that no file of pipeplan includes a header of a higher layer (cmake/layers.txt).
#
# Usage: cmake/check_layers.sh [ROOT]
#
# Scans every .hpp and .cpp under ROOT/include/pipeplan and ROOT/src (ROOT defaults to the
# checkout that holds this script) for `#include "..."` lines and resolves each to a module:
# `pipeplan/io/json.hpp` is `io`, `pipeplan/plan.hpp` is `plan`, and a path without `pipeplan/`
# is looked up next to the including file (`commands.hpp` in src/cli is `cli`,
# `../report/export_util.hpp` in src/schedule is `report`). Prints one line per violation,
#
#   src/io/units.cpp:12: layer 1 (io) includes layer 11 (report) (higher)
#
# A file may include its own module and every lower layer. Another module of its own layer is a
# violation too (`(same layer)`), and so is a module that cmake/layers.txt does not place.
# Exit status: 0 when clean, 1 on a violation, 2 on a malformed layer file or a missing folder.
# POSIX sh and awk only (no Python: the README's packages do not bring it). O(bytes scanned).
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
layers=cmake/layers.txt
[ -f "$layers" ] || { echo "$root/$layers: no layer file" >&2; exit 2; }
for folder in include/pipeplan src; do
  [ -d "$folder" ] || { echo "$root/$folder: no such folder" >&2; exit 2; }
done
files=$(find include/pipeplan src -type f \( -name '*.hpp' -o -name '*.cpp' \) | LC_ALL=C sort)
# shellcheck disable=SC2086  # the file names hold no spaces (checked below)
case $files in *" "*) echo "a file name under include/pipeplan or src holds a space" >&2; exit 2 ;; esac

# shellcheck disable=SC2086
LC_ALL=C awk -v layer_file="$layers" '
# The module of a path relative to the root, or "" outside include/pipeplan and src.
function module_of(path,    rest, parts) {
  if (substr(path, 1, 17) == "include/pipeplan/") rest = substr(path, 18)
  else if (substr(path, 1, 4) == "src/") rest = substr(path, 5)
  else return ""
  if (index(rest, "/") == 0) { sub(/\.[^.]*$/, "", rest); return rest }
  split(rest, parts, "/")
  return parts[1]
}
# `dir/target` with "." and ".." segments folded; "" when it climbs out of the root.
function normalize(dir, target,    parts, out, n, i, count, result) {
  n = split(dir "/" target, parts, "/")
  count = 0
  for (i = 1; i <= n; i++) {
    if (parts[i] == "" || parts[i] == ".") continue
    if (parts[i] == "..") { if (count == 0) return ""; count--; continue }
    out[++count] = parts[i]
  }
  result = ""
  for (i = 1; i <= count; i++) result = result (i > 1 ? "/" : "") out[i]
  return result
}
function exists(path,    line, status) {
  status = (getline line < path)
  if (status >= 0) close(path)
  return status >= 0
}
function describe(module) { return "layer " layer[module] " (" module ")" }
function report(text) { print FILENAME ":" FNR ": " text; failed = 1 }
FNR == NR {
  sub(/#.*/, "")
  if (NF == 0) next
  if ($1 !~ /^[0-9]+$/ || NF < 2) {
    print layer_file ":" FNR ": expected `<layer> <module>...`" > "/dev/stderr"; malformed = 1; exit 2
  }
  for (i = 2; i <= NF; i++) {
    if ($i in layer) {
      print layer_file ":" FNR ": module " $i " is already in layer " layer[$i] > "/dev/stderr"
      malformed = 1; exit 2
    }
    layer[$i] = $1 + 0
  }
  next
}
FNR == 1 {
  own = module_of(FILENAME)
  dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
  unplaced = !(own in layer)
  if (unplaced) report("module " own " has no layer in cmake/layers.txt")
}
unplaced { next }
/^[ \t]*#[ \t]*include[ \t]*"/ {
  target = $0; sub(/^[^"]*"/, "", target); sub(/".*$/, "", target)
  if (substr(target, 1, 9) == "pipeplan/") other = module_of("include/" target)
  else {
    path = normalize(dir, target)
    other = (path != "" && exists(path)) ? module_of(path) : ""
  }
  if (other == "" || other == own) next
  if (!(other in layer)) report("includes module " other ", which has no layer in cmake/layers.txt")
  else if (layer[other] > layer[own]) report(describe(own) " includes " describe(other) " (higher)")
  else if (layer[other] == layer[own]) report(describe(own) " includes " describe(other) " (same layer)")
}
END { if (malformed) exit 2; exit failed ? 1 : 0 }
' "$layers" $files
