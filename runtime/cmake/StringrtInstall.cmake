# Install rules of libstringrt (docs/install.md): the shared library
# libstringrt.so (every object of the static libstringrt.a, linked whole),
# the static library, libstringrt_cuda.a where the CUDA backend is built,
# the public headers, a relocatable CMake package config
# (find_package(stringrt CONFIG) -> stringrt::stringrt, stringrt::stringrt_static,
# stringrt::stringrt_cuda) and stringrt.pc for pkg-config. Included by
# runtime/CMakeLists.txt, so the whole build and the runtime-only build
# (`cmake -S runtime`) install the same files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared library: no sources of its own (an empty translation unit,
# because CMake wants one), the static library's objects linked whole, so
# the code is compiled once for both.
set(stringrt_shared_source ${CMAKE_CURRENT_BINARY_DIR}/stringrt_shared.cpp)
file(GENERATE OUTPUT ${stringrt_shared_source}
  CONTENT "// libstringrt.so is libstringrt.a linked whole (runtime/cmake/StringrtInstall.cmake).\n")
add_library(stringrt_shared SHARED ${stringrt_shared_source})
target_link_libraries(stringrt_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,stringrt>")
target_include_directories(stringrt_shared PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(stringrt_shared INTERFACE cxx_std_17)
set_target_properties(stringrt_shared PROPERTIES
  OUTPUT_NAME stringrt EXPORT_NAME stringrt
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set_target_properties(stringrt PROPERTIES EXPORT_NAME stringrt_static)
target_compile_features(stringrt INTERFACE cxx_std_17)

set(stringrt_install_targets stringrt_shared stringrt)
if(TARGET stringrt_cuda)
  list(APPEND stringrt_install_targets stringrt_cuda)
endif()
install(TARGETS ${stringrt_install_targets} EXPORT stringrtTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/stringrt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT runtime)

set(STRINGRT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/stringrt)
install(EXPORT stringrtTargets NAMESPACE stringrt:: DESTINATION ${STRINGRT_CMAKE_DIR}
  COMPONENT runtime)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/stringrtConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/stringrtConfig.cmake INSTALL_DESTINATION ${STRINGRT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/stringrtConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/stringrtConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/stringrtConfigVersion.cmake
  DESTINATION ${STRINGRT_CMAKE_DIR} COMPONENT runtime)

# pkg-config: relocatable (prefix is ${pcfiledir} and one ".." per
# component of LIBDIR/pkgconfig); the static link's extra libraries in
# Libs.private (`pkg-config --static`).
set(STRINGRT_PC_PREFIX "\${pcfiledir}")
string(REPLACE "/" ";" stringrt_pc_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
foreach(part IN LISTS stringrt_pc_parts)
  string(APPEND STRINGRT_PC_PREFIX "/..")
endforeach()
set(STRINGRT_PC_PRIVATE_LIBS "-lfmt -lz -lpthread")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND STRINGRT_PC_PRIVATE_LIBS " -l${lib}")
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/stringrt.pc.in
  ${CMAKE_CURRENT_BINARY_DIR}/stringrt.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/stringrt.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT runtime)
