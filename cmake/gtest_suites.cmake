# One CTest test per GoogleTest suite (tests/CMakeLists.txt, PIPEPLAN_TESTS_PER_SUITE): run after
# pipeplan_tests is built, it lists the binary's tests and writes CTEST_FILE, which CTest
# includes. Under the sanitizers a process of the test binary takes about 0.6 s to start, so
# its tests run one process per suite (1,144 tests in 119 processes on 2026-12-06); a failing
# test is still named in its suite's output.
#   cmake -DTEST_EXECUTABLE=... -DWORKING_DIRECTORY=... -DCTEST_FILE=... -P gtest_suites.cmake
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
  WORKING_DIRECTORY "${WORKING_DIRECTORY}" TIMEOUT 120
  RESULT_VARIABLE result OUTPUT_VARIABLE listing ERROR_VARIABLE errors)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${result}): ${errors}")
endif()

# A suite is a line that does not start with a space: "Suite." or "Prefix/Suite." with an
# optional "  # TypeParam = ..." comment; the indented lines below it are its tests.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
    string(APPEND content
      "add_test([==[${suite}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==])\n"
      "set_tests_properties([==[${suite}]==] PROPERTIES WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==])\n")
  endif()
endforeach()
file(WRITE "${CTEST_FILE}" "${content}")
