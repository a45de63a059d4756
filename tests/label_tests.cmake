# Run by CTest after doctest's discovered tests are defined (a TEST_INCLUDE_FILES script): labels
# each test case of the doctest suites "runtime" (TEST_SUITE_BEGIN("runtime") in its file) and
# "store" (a store's tests that start no scheduler: the decorator doctest::test_suite("store"))
# with the CTest label of its suite, so that presets and scripts select them by label and a new
# test is selected by the file it is in, not by the prefix of its name. One process lists each
# suite. FAIRGATE_TESTS names the test executable.
foreach(suite runtime store)
  execute_process(
    COMMAND "${FAIRGATE_TESTS}" --test-suite=${suite} --list-test-cases
    OUTPUT_VARIABLE listed
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "listing the suite ${suite}'s tests failed (${result}):\n${listed}")
  endif()
  string(REPLACE "\n" ";" listed "${listed}")
  foreach(line IN LISTS listed)
    if(line STREQUAL "" OR line MATCHES "^===" OR line MATCHES [==[^\[doctest\] ]==])
      continue()
    endif()
    set_tests_properties("${line}" PROPERTIES LABELS ${suite})
  endforeach()
endforeach()
