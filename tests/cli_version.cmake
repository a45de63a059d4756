# Runs `fairgate --version` and requires exit status 0 and "fairgate <the project's version>".
execute_process(COMMAND ${FAIRGATE} --version
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "expected exit status 0, got '${status}'; stderr: ${err}")
endif()
string(STRIP "${out}" out)
if(NOT out STREQUAL "fairgate ${VERSION}")
  message(FATAL_ERROR "expected 'fairgate ${VERSION}', got '${out}'")
endif()
