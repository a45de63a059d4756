# Runs `fairgate sim TRACE` and requires exit status 2 with a one-line message naming the trace.
execute_process(COMMAND ${FAIRGATE} sim ${TRACE}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 2)
  message(FATAL_ERROR "expected exit status 2, got '${status}'; stderr: ${err}")
endif()
string(STRIP "${err}" err)
if(NOT err MATCHES "^fairgate sim: .*unknown-type.json: job 1: field 'type': unknown job type 'clone'$")
  message(FATAL_ERROR "unexpected message: '${err}'")
endif()
