# Installs the build in BUILD_DIR under PREFIX and runs the installed binary: the test of
# install(TARGETS pipeplan).
# Usage: cmake -DBUILD_DIR=... -DPREFIX=... -DBINDIR=bin -P install_check.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
  RESULT_VARIABLE result OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${result}")
endif()
set(binary "${PREFIX}/${BINDIR}/pipeplan")
if(NOT EXISTS "${binary}")
  message(FATAL_ERROR "cmake --install did not install ${binary}")
endif()
execute_process(COMMAND "${binary}" --version OUTPUT_VARIABLE version RESULT_VARIABLE result)
if(NOT result EQUAL 0 OR NOT version MATCHES "^pipeplan ")
  message(FATAL_ERROR "the installed pipeplan --version failed: ${result} ${version}")
endif()
file(REMOVE_RECURSE "${PREFIX}")
