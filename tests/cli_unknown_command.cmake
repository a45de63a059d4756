# Runs `fairgate bogus` and requires exit status 2 with one line naming the command given.
execute_process(COMMAND ${FAIRGATE} bogus
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 2)
  message(FATAL_ERROR "expected exit status 2, got '${status}'; stderr: ${err}")
endif()
string(STRIP "${err}" err)
if(NOT err MATCHES "^fairgate: unknown command 'bogus' \\(the commands: sim; --help\\)$")
  message(FATAL_ERROR "unexpected message: '${err}'")
endif()
