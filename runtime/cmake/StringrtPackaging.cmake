# `cpack -G DEB` in a build directory: a Debian package of what
# `cmake --install` installs (docs/install.md), into /usr. Included last by
# the top-level CMakeLists.txt and by the runtime-only build.
# "stringc" from the whole build, "stringrt" from the runtime-only one.
set(CPACK_PACKAGE_NAME ${CMAKE_PROJECT_NAME})
set(CPACK_PACKAGE_VERSION ${CMAKE_PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stringc developers <stringc@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "stringc: a compiler and runtime for transformers with structured positional encodings")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The dependencies from the binaries' shared libraries (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_GENERATOR DEB)
include(CPack)
