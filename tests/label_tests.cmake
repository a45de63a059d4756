# Run by CTest after doctest's discovered tests are defined (a TEST_INCLUDE_FILES script): labels
# each test case of the doctest suite "runtime" (TEST_SUITE_BEGIN("runtime") in its file) with the
# CTest label "runtime", so that presets and scripts select the runtime's tests by label and a new
# runtime test is selected by the file it is in, not by the prefix of its name. One process lists
# the suite. FAIRGATE_TESTS names the test executable.
execute_process(
  COMMAND "${FAIRGATE_TESTS}" --test-suite=runtime --list-test-cases
  OUTPUT_VARIABLE listed
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "listing the runtime's tests failed (${result}):\n${listed}")
endif()
string(REPLACE "\n" ";" listed "${listed}")
foreach(line IN LISTS listed)
  if(line STREQUAL "" OR line MATCHES "^===" OR line MATCHES [==[^\[doctest\] ]==])
    continue()
  endif()
  set_tests_properties("${line}" PROPERTIES LABELS runtime)
endforeach()
