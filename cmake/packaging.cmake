# Debian packages, one per install component, built by `cpack` in a build tree configured with
# BUILD_SHARED_LIBS=ON (tests/install_consumer/deb.sh builds them, installs them on the machine,
# builds a consumer against them and removes them):
#   fairgate        the shared libraries (runtime)
#   fairgate-dev    headers, the libraries' links, the CMake package and the pkg-config files (dev)
#   fairgate-tools  the fairgate program and the examples' programs (tools)
# The runtime's and the tools' dependencies are read from their binaries (dpkg-shlibdeps); the
# development package depends on what its CMake and pkg-config files look for.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fairgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "fairgate developers <fairgate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "admission control for servers: which job runs next, fairly, within caps and conflicts")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
if(BUILD_SHARED_LIBS)
  set(CPACK_COMPONENTS_ALL runtime dev tools)
else()  # static libraries only: nothing to run against, so no runtime package
  set(CPACK_COMPONENTS_ALL dev tools)
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME fairgate)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME fairgate-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME fairgate-tools)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "fairgate's shared libraries")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "fairgate's headers, CMake package (find_package(fairgate)) and pkg-config files")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
  "the fairgate program (simulator, reports) and the examples' servers and clients")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The tools link the runtime package's libraries, found here while the packages are made.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_CURRENT_BINARY_DIR})
if(BUILD_SHARED_LIBS)
  set(fairgate_deb_runtime "fairgate (= ${PROJECT_VERSION})")
  set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${fairgate_deb_runtime}")
  set(fairgate_deb_dev_depends "${fairgate_deb_runtime}, ")
endif()
string(APPEND fairgate_deb_dev_depends
  "libabsl-dev, libboost-dev, libboost-fiber-dev, libboost-context-dev, libboost-container-dev, "
  "nlohmann-json3-dev, libsqlite3-dev, libpq-dev, pkg-config")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${fairgate_deb_dev_depends}")
include(CPack)
