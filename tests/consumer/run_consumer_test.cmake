# CTest driver: install ember into a scratch prefix, then configure, build and run the consumer
# project against it. Variables: EMBER_BUILD_DIR, CONSUMER_SRC, WORK_DIR, and OUTER_PREFIX_PATH
# (the build's own CMAKE_PREFIX_PATH with '|' for ';', where ember's dependencies were found),
# SIMCC_PROGRAM (a .cu program the installed ember-simcc must compile and run).
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()
run(${CMAKE_COMMAND} --install "${EMBER_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
string(REPLACE "|" ";" outer_prefix_path "${OUTER_PREFIX_PATH}")
set(prefix_path "${WORK_DIR}/prefix" ${outer_prefix_path})
string(REPLACE ";" "\\;" prefix_path "${prefix_path}")  # one -D argument
run(${CMAKE_COMMAND} -S "${CONSUMER_SRC}" -B "${WORK_DIR}/build" "-DCMAKE_PREFIX_PATH=${prefix_path}"
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")

# The installed ember-simcc (bin/, with its headers and libember_simrt) on an unmodified program.
run("${WORK_DIR}/prefix/bin/ember-simcc" -O1 "${SIMCC_PROGRAM}" -o "${WORK_DIR}/simcc_program")
run("${WORK_DIR}/simcc_program")
