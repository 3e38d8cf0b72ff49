# The layer check (cmake/check_layers.sh) fails on a bad include: runs it on a copy of include/,
# src/ and cmake/layers.txt, first unchanged (it must pass, so each failure below comes from the
# one line added), then with one bad include at a time, expecting exit 1 and exactly the line
# naming the file, the line and the two layers.
# Usage: cmake -DSOURCE_DIR=... -DWORK_DIR=... -P layers_check.cmake
cmake_minimum_required(VERSION 3.25)

function(copy_tree)
  file(REMOVE_RECURSE "${WORK_DIR}")
  file(COPY "${SOURCE_DIR}/include" "${SOURCE_DIR}/src" DESTINATION "${WORK_DIR}")
  file(COPY "${SOURCE_DIR}/cmake/layers.txt" "${SOURCE_DIR}/cmake/check_layers.sh"
    DESTINATION "${WORK_DIR}/cmake")
endfunction()

function(run_check out_result out_output)
  execute_process(COMMAND sh "${WORK_DIR}/cmake/check_layers.sh" "${WORK_DIR}"
    RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  set(${out_result} "${result}" PARENT_SCOPE)
  set(${out_output} "${output}${errors}" PARENT_SCOPE)
endfunction()

# Appends `line` to `file` (relative to the copy) and expects the check to print `expected`
# (with @LINE@ replaced by the appended line's number) and nothing else, and to exit 1.
function(expect_violation file line expected)
  copy_tree()
  file(READ "${WORK_DIR}/${file}" content)
  string(REGEX MATCHALL "\n" newlines "${content}")
  list(LENGTH newlines count)
  math(EXPR number "${count} + 1")
  file(APPEND "${WORK_DIR}/${file}" "${line}\n")
  string(REPLACE "@LINE@" "${number}" expected "${expected}")
  run_check(result output)
  if(NOT result EQUAL 1 OR NOT output STREQUAL "${expected}\n")
    message(FATAL_ERROR "adding `${line}` to ${file}: expected exit 1 and\n${expected}\n"
      "got exit ${result} and\n${output}")
  endif()
endfunction()

copy_tree()
run_check(result output)
if(NOT result EQUAL 0 OR NOT output STREQUAL "")
  message(FATAL_ERROR "the unchanged copy fails the check (exit ${result}):\n${output}")
endif()

# A lower layer including a higher one, by its pipeplan/ path.
expect_violation(src/io/units.cpp "#include \"pipeplan/report/summary.hpp\""
  "src/io/units.cpp:@LINE@: layer 1 (io) includes layer 11 (report) (higher)")
# The same in a header.
expect_violation(include/pipeplan/simulate/task_graph.hpp "#include \"pipeplan/planners/planner.hpp\""
  "include/pipeplan/simulate/task_graph.hpp:@LINE@: layer 6 (simulate) includes layer 10 (planners) (higher)")
# A path relative to the including file is resolved before its module is looked up.
expect_violation(src/schedule/scheduler.cpp "#include \"../report/export_util.hpp\""
  "src/schedule/scheduler.cpp:@LINE@: layer 9 (schedule) includes layer 11 (report) (higher)")
# Two modules of one layer may not include each other.
expect_violation(include/pipeplan/error.hpp "#include \"pipeplan/version.hpp\""
  "include/pipeplan/error.hpp:@LINE@: layer 0 (error) includes layer 0 (version) (same layer)")
# A module that the layer file does not place.
copy_tree()
file(WRITE "${WORK_DIR}/src/newmodule/thing.cpp" "#include \"pipeplan/io/json.hpp\"\n")
run_check(result output)
if(NOT result EQUAL 1 OR NOT output STREQUAL
    "src/newmodule/thing.cpp:1: module newmodule has no layer in cmake/layers.txt\n")
  message(FATAL_ERROR "an unplaced module: got exit ${result} and\n${output}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
