# Fails when a CTest test that runs one Catch case would run none, or a Catch case has no CTest
# test (`cmake -DBUILD_DIR=... -P every_catch_test_selects_its_case.cmake`).
#
# Note [Test names catch_discover_tests cannot carry]: catch_discover_tests turns Catch's list
# of names into a CMake list, so a ';' in a TEST_CASE name cuts it into two tests, and an
# unmatched '[' or ']' glues the following names into one; it then passes each name back to
# Catch as a test spec, where a '\' is an escape. Each such test selects no case, and Catch
# running no case exits 0: CTest reports "Passed" for a test that asserted nothing. So for
# every test whose name starts with its Catch executable's name and a ':' (the TEST_PREFIX of
# ember_add_test, or a hand-written add_test of one case), the spec it passes must select
# exactly one case, and every case that Catch lists must be selected by some test.
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --show-only=json-v1 WORKING_DIRECTORY ${BUILD_DIR}
                OUTPUT_VARIABLE json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest --show-only failed (${rc})")
endif()

# Names are compared as strings; before a list of them is split at line ends, the characters
# that CMake's lists treat specially are swapped for control characters no name holds.
string(ASCII 1 semicolon_mark)
string(ASCII 2 open_mark)
string(ASCII 3 close_mark)
function(split_lines text out)
  string(REPLACE ";" "${semicolon_mark}" text "${text}")
  string(REPLACE "[" "${open_mark}" text "${text}")
  string(REPLACE "]" "${close_mark}" text "${text}")
  string(STRIP "${text}" text)
  if(text STREQUAL "")
    set(${out} "" PARENT_SCOPE)
  else()
    string(REPLACE "\n" ";" text "${text}")
    set(${out} "${text}" PARENT_SCOPE)
  endif()
endfunction()
function(readable text out)
  string(REPLACE "${semicolon_mark}" ";" text "${text}")
  string(REPLACE "${open_mark}" "[" text "${text}")
  string(REPLACE "${close_mark}" "]" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# As in every_test_has_a_timeout.cmake: take each test's object once from the big document.
string(JSON tests GET "${json}" tests)
string(JSON count LENGTH "${tests}")
set(problems "")
set(executables "")
set(checked 0)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON test GET "${tests}" ${i})
  string(JSON name GET "${test}" name)
  string(JSON ncommand ERROR_VARIABLE no_command LENGTH "${test}" command)
  if(no_command OR ncommand LESS 2)
    continue()
  endif()
  string(JSON exe GET "${test}" command 0)
  get_filename_component(exe_name "${exe}" NAME)
  string(FIND "${name}" "${exe_name}:" at)
  if(NOT at EQUAL 0)
    continue()  # not one Catch case: a script, a tag, a sanitizer or MPI wrapper
  endif()
  string(JSON spec GET "${test}" command 1)
  execute_process(COMMAND "${exe}" "${spec}" --list-test-names-only WORKING_DIRECTORY ${BUILD_DIR}
                  OUTPUT_VARIABLE selected ERROR_VARIABLE selected RESULT_VARIABLE ignored)
  split_lines("${selected}" selected)
  list(LENGTH selected nselected)
  math(EXPR checked "${checked} + 1")
  if(NOT nselected EQUAL 1)
    readable("${selected}" shown)
    string(APPEND problems "\n  '${name}' selects ${nselected} Catch cases, not 1 (spec '${spec}'): ${shown}")
    continue()
  endif()
  list(FIND executables "${exe}" e)
  if(e EQUAL -1)
    list(LENGTH executables e)
    list(APPEND executables "${exe}")
    set(selected_${e} "")
  endif()
  string(APPEND selected_${e} "\n${selected}\n")
endforeach()

list(LENGTH executables nexecutables)
if(nexecutables GREATER 0)
  math(EXPR last "${nexecutables} - 1")
  foreach(e RANGE ${last})
    list(GET executables ${e} exe)
    execute_process(COMMAND "${exe}" --list-test-names-only WORKING_DIRECTORY ${BUILD_DIR}
                    OUTPUT_VARIABLE listed RESULT_VARIABLE ignored)
    split_lines("${listed}" listed)
    foreach(case IN LISTS listed)
      string(FIND "${selected_${e}}" "\n${case}\n" at)
      if(at EQUAL -1)
        readable("${case}" shown)
        string(APPEND problems "\n  ${exe}: case '${shown}' is run by no CTest test")
      endif()
    endforeach()
  endforeach()
endif()

if(problems)
  message(FATAL_ERROR "Catch cases that CTest would not run, see Note [Test names catch_discover_tests "
                      "cannot carry] (rename them: no ';', '\\' or unmatched '[' ']'):${problems}")
endif()
message(STATUS "each of ${checked} tests selects its one Catch case, and every case of "
               "${nexecutables} executables has a test")
