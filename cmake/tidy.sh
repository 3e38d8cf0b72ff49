#!/bin/sh
# The style the repository declares, enforced (CI runs this):
#   cmake/tidy.sh format   clang-format-16 --dry-run over every C++ file in src, include, tests
#   cmake/tidy.sh tidy     clang-tidy-16 over every source in src (needs build/dev configured:
#                          its compile_commands.json); findings are errors (.clang-tidy)
#   cmake/tidy.sh fix      clang-format-16 -i over the same files (the one reformat)
# With no argument: format, then tidy.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
format=${CLANG_FORMAT:-clang-format-16}
tidy=${CLANG_TIDY:-clang-tidy-16}
files() { git ls-files 'src/*.cpp' 'src/*.hpp' 'include/*.hpp' 'tests/*.cpp' 'tests/*.hpp'; }
run_format() { files | xargs "$format" --dry-run --Werror; }
run_tidy() {
  [ -f build/dev/compile_commands.json ] || cmake --preset dev > /dev/null
  git ls-files 'src/*.cpp' | xargs -P "$(nproc)" -n 4 "$tidy" -p build/dev --quiet
}
case "${1:-all}" in
  format) run_format ;;
  tidy) run_tidy ;;
  fix) files | xargs "$format" -i ;;
  all) run_format && run_tidy ;;
  *) echo "usage: cmake/tidy.sh [format|tidy|fix]" >&2; exit 2 ;;
esac
