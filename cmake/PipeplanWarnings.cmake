# Warnings as an INTERFACE target, linked PRIVATE by pipeplan's own targets. -Werror lives in
# CMakePresets.json (preset `dev`), not here, so that a newer compiler never breaks a user build.
add_library(pipeplan_warnings INTERFACE)
target_compile_options(pipeplan_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough>)
