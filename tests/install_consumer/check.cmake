# Installs the built project into a scratch prefix, then configures, builds and runs a consumer
# project that uses find_package(fairgate), and compiles every C++ block of the README, the docs
# and the examples' READMEs against it (snippets.cmake extracts them).
file(REMOVE_RECURSE ${WORK_DIR})
file(GLOB markdown RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/README.md ${SOURCE_DIR}/docs/*.md
  ${SOURCE_DIR}/examples/*/README.md)
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${SOURCE_DIR} "-DFILES=${markdown}"
  -DOUT_DIR=${WORK_DIR}/snippets -P ${CMAKE_CURRENT_LIST_DIR}/snippets.cmake
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status)
  message(FATAL_ERROR "extracting the documentation's snippets failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${WORK_DIR}/prefix
  RESULT_VARIABLE status OUTPUT_QUIET)
if(status)
  message(FATAL_ERROR "install failed: ${status}")
endif()
set(flags "")
if(SANITIZE)
  # A sanitized fairgate needs a sanitized consumer to link.
  set(flags -DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE} -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer
  -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release ${flags}
  -DSNIPPETS_DIR=${WORK_DIR}/snippets
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status)
  message(FATAL_ERROR "configuring the consumer failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status)
  message(FATAL_ERROR "building the consumer failed:\n${out}\n${err}")
endif()
foreach(program core_only runsync_only with_stores c_only)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE status OUTPUT_VARIABLE out)
  if(NOT status EQUAL 0 OR NOT out MATCHES "^ok")
    message(FATAL_ERROR "the consumer ${program} failed: ${status} ${out}")
  endif()
endforeach()

# pkg-config, without CMake: the core alone, and the scheduler with both stores and Asio.
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CXX NAMES c++ g++ REQUIRED)
file(GLOB_RECURSE pc_files ${WORK_DIR}/prefix/*/fairgate.pc)
if(NOT pc_files)
  message(FATAL_ERROR "fairgate.pc was not installed")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
foreach(program_and_packages "core_only:fairgate-core"
    "with_stores:fairgate-sqlite fairgate-postgres fairgate-asio")
  string(REPLACE ":" ";" pair "${program_and_packages}")
  list(GET pair 0 program)
  list(GET pair 1 packages)
  separate_arguments(packages)
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${packages} RESULT_VARIABLE status
    OUTPUT_VARIABLE flags_out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(status)
    message(FATAL_ERROR "pkg-config --cflags --libs ${packages} failed: ${err}")
  endif()
  separate_arguments(flags_out UNIX_COMMAND "${flags_out}")
  set(sanitize "")
  if(SANITIZE)
    set(sanitize -fsanitize=${SANITIZE})
  endif()
  execute_process(COMMAND ${CXX} -std=c++20 -O1 ${sanitize}
    ${SOURCE_DIR}/tests/install_consumer/${program}.cc -o ${WORK_DIR}/pkgconfig_${program}
    ${flags_out}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status)
    execute_process(COMMAND ${WORK_DIR}/pkgconfig_${program} RESULT_VARIABLE status
      OUTPUT_VARIABLE out)
  endif()
  if(status OR NOT out MATCHES "^ok")
    message(FATAL_ERROR "${program} built with pkg-config (${packages}) failed: ${status}\n${out}\n${err}")
  endif()
endforeach()

# The C interface with pkg-config alone: fairgate-c, and a C compiler (its shared library found
# at run time where fairgate-c.pc's libdir says).
find_program(CC NAMES cc gcc REQUIRED)
get_filename_component(pc_libdir "${pc_dir}" DIRECTORY)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs fairgate-c RESULT_VARIABLE status
  OUTPUT_VARIABLE flags_out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(status)
  message(FATAL_ERROR "pkg-config --cflags --libs fairgate-c failed: ${err}")
endif()
separate_arguments(flags_out UNIX_COMMAND "${flags_out}")
execute_process(COMMAND ${CC} -std=c99 -Wall -Werror ${sanitize}
  ${SOURCE_DIR}/tests/install_consumer/c_only.c -o ${WORK_DIR}/pkgconfig_c_only ${flags_out}
  -Wl,-rpath,${pc_libdir}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status)
  execute_process(COMMAND ${WORK_DIR}/pkgconfig_c_only RESULT_VARIABLE status OUTPUT_VARIABLE out)
endif()
if(status OR NOT out MATCHES "^ok")
  message(FATAL_ERROR "c_only built with pkg-config (fairgate-c) failed: ${status}\n${out}\n${err}")
endif()

# The programs installed beside the library run from the prefix (PROGRAMS, comma-separated).
string(REPLACE "," ";" programs "${PROGRAMS}")
foreach(program IN LISTS programs)
  set(flag --help)
  if(program STREQUAL "fairgate")
    set(flag --version)
  endif()
  execute_process(COMMAND ${WORK_DIR}/prefix/bin/${program} ${flag} RESULT_VARIABLE status
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "the installed ${program} ${flag} failed: ${status}\n${out}\n${err}")
  endif()
  if(program STREQUAL "fairgate" AND NOT out MATCHES "^fairgate [0-9]+\\.[0-9]+\\.[0-9]+")
    message(FATAL_ERROR "fairgate --version printed: ${out}")
  endif()
endforeach()
list(LENGTH programs installed)
if(installed LESS 1)
  message(FATAL_ERROR "no installed program to check (PROGRAMS is empty)")
endif()

# A consumer project of its own folder, tests/install_consumer/<project>, whose program of the
# same name must say "ok": configured against the prefix with ARGN, built and run.
function(expect_consumer_runs project what)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer/${project}
    -B ${WORK_DIR}/${project} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
    ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status)
    execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/${project}
      RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  endif()
  if(NOT status)
    execute_process(COMMAND ${WORK_DIR}/${project}/${project} RESULT_VARIABLE status
      OUTPUT_VARIABLE out)
  endif()
  if(status OR NOT out MATCHES "^ok")
    message(FATAL_ERROR "a consumer of ${what} failed: ${status}\n${out}\n${err}")
  endif()
endfunction()

# COMPONENTS c needs nothing but the C library: with Abseil, Boost and nlohmann_json hidden, a C
# project that asks for it alone configures, builds and runs.
set(c_flags "")
if(SANITIZE)
  set(c_flags -DCMAKE_C_FLAGS=-fsanitize=${SANITIZE} -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE})
endif()
expect_consumer_runs(c_alone "COMPONENTS c alone" ${c_flags} -DCMAKE_DISABLE_FIND_PACKAGE_absl=ON
  -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)

# COMPONENTS core needs only what the core needs: with nlohmann_json hidden (the runtime needs it,
# the core does not), a project that asks for the core alone configures, builds and runs...
expect_consumer_runs(core_alone "COMPONENTS core alone" ${flags}
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
# ... and, the control, one that asks for the runtime does not.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer
  -B ${WORK_DIR}/without_json -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
  RESULT_VARIABLE status OUTPUT_QUIET ERROR_QUIET)
if(NOT status)
  message(FATAL_ERROR "the runtime's consumer configured without nlohmann_json: the check above "
                      "proves nothing")
endif()

# Each program links only its layers: what the dynamic loader would load for it. The libraries
# are static, so a layer's dependencies show up here only if the program's link pulled them in.
function(expect_not_linked program)
  execute_process(COMMAND ldd ${WORK_DIR}/build/${program} RESULT_VARIABLE status
    OUTPUT_VARIABLE libraries)
  if(status)
    message(FATAL_ERROR "ldd ${program} failed: ${status}")
  endif()
  foreach(library IN LISTS ARGN)
    if(libraries MATCHES "${library}")
      message(FATAL_ERROR "${program} links ${library}, which its layers do not need:\n${libraries}")
    endif()
  endforeach()
endfunction()
expect_not_linked(core_only libpq libsqlite3 libboost_fiber libboost_context)
expect_not_linked(runsync_only libpq libsqlite3)
# The control: the program that uses the stores does link them, so the checks above can fail.
execute_process(COMMAND ldd ${WORK_DIR}/build/with_stores OUTPUT_VARIABLE libraries)
if(NOT libraries MATCHES "libpq" OR NOT libraries MATCHES "libsqlite3")
  message(FATAL_ERROR "with_stores should link libpq and libsqlite3:\n${libraries}")
endif()
