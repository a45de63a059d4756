# Runs ${FAIRGATE} with ARGS (words separated by spaces) and requires exit status STATUS and its
# standard output (STREAM=OUT) or error (STREAM=ERR), stripped, to match the regular expression
# MATCH: one line, since the expression has no newline.
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${FAIRGATE} ${args}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL STATUS)
  message(FATAL_ERROR "expected exit status ${STATUS}, got '${status}'; stderr: ${err}")
endif()
if(STREAM STREQUAL "OUT")
  set(text "${out}")
else()
  set(text "${err}")
endif()
string(STRIP "${text}" text)
if(NOT text MATCHES "${MATCH}")
  message(FATAL_ERROR "expected a match of '${MATCH}', got '${text}'")
endif()
