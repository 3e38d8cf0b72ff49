# Installs the build in BUILD_DIR under PREFIX and runs the installed binary: the test of
# install(TARGETS pipeplan) and of the manual page docs/pipeplan.1, which must name every
# command and every long option that the commands' --help texts list (so that the two stay in
# step: a new option without a line in the manual page fails here).
# Usage: cmake -DBUILD_DIR=... -DPREFIX=... -DBINDIR=bin -DMANDIR=share/man -P install_check.cmake
cmake_minimum_required(VERSION 3.25)
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

set(page "${PREFIX}/${MANDIR}/man1/pipeplan.1")
if(NOT EXISTS "${page}")
  message(FATAL_ERROR "cmake --install did not install the manual page ${page}")
endif()
file(READ "${page}" manual)
string(REPLACE "\\-" "-" manual "${manual}")  # roff writes a minus sign as \-

# Every command of `pipeplan --help` has a section `.SS "<command> ..."` (commands with
# subcommands, import, model and topology, have one per subcommand).
execute_process(COMMAND "${binary}" --help OUTPUT_VARIABLE help RESULT_VARIABLE result)
string(REGEX REPLACE ".*\nSubcommands:\n" "" listed "${help}")
string(REGEX MATCHALL "\n  [a-z]+ " commands "\n${listed}")
list(LENGTH commands count)
if(NOT result EQUAL 0 OR count LESS 5)
  message(FATAL_ERROR "pipeplan --help lists no commands (exit ${result}):\n${help}")
endif()
set(invocations "")
foreach(entry IN LISTS commands)
  string(STRIP "${entry}" command)
  if(command STREQUAL "import")
    list(APPEND invocations "import pipedream")
  elseif(command STREQUAL "model")
    list(APPEND invocations "model transformer" "model gpus")
  elseif(command STREQUAL "topology")
    list(APPEND invocations "topology cluster" "topology types")
  else()
    list(APPEND invocations "${command}")
  endif()
endforeach()

# Every long option of every command's --help appears in the manual page.
foreach(invocation IN LISTS invocations)
  if(NOT manual MATCHES "\n\\.SS \"${invocation}[ \"]")
    message(FATAL_ERROR "the manual page has no section for `pipeplan ${invocation}`")
  endif()
  separate_arguments(words UNIX_COMMAND "${invocation}")
  execute_process(COMMAND "${binary}" ${words} --help OUTPUT_VARIABLE help RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "pipeplan ${invocation} --help failed: ${result}")
  endif()
  string(REGEX MATCHALL "--[a-z][a-z-]*" options "${help}")
  list(REMOVE_DUPLICATES options)
  foreach(option IN LISTS options)
    if(NOT manual MATCHES "${option}([^A-Za-z0-9-]|$)")
      message(FATAL_ERROR "`pipeplan ${invocation} --help` lists ${option}, the manual page "
        "(docs/pipeplan.1) does not")
    endif()
  endforeach()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
