# Warnings as an INTERFACE target, linked PRIVATE by pipeplan's own targets. -Werror lives in
# CMakePresets.json (preset `dev`), not here, so that a newer compiler never breaks a user build.
add_library(pipeplan_warnings INTERFACE)
target_compile_options(pipeplan_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough>
  # GCC 12 reports false -Warray-bounds positives inside libstdc++'s red-black tree when it
  # inlines nlohmann::json objects (GCC bug 105705 and relatives); clang keeps checking.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-array-bounds>)
