# The runtime must build on a machine without MLIR/LLVM (the GPU machine).
# Fail at configure time if any runtime source includes an MLIR or LLVM header.
function(stringrt_check_no_mlir_includes dir)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
    ${dir}/*.h ${dir}/*.hpp ${dir}/*.cpp ${dir}/*.cc ${dir}/*.cu ${dir}/*.cuh)
  foreach(src IN LISTS sources)
    file(STRINGS ${src} bad REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](mlir|llvm|llvm-c)/")
    if(bad)
      message(FATAL_ERROR "${src} includes MLIR/LLVM (${bad}); the runtime must not depend on them")
    endif()
  endforeach()
endfunction()
