# fp8jit.pc, installed beside the CMake package (LIBDIR/pkgconfig), for builds without CMake:
#   c++ app.cpp $(pkg-config --cflags --libs fp8jit)      links libfp8jit.so
# `pkg-config --static --libs fp8jit` adds what the archive libfp8jit.a needs on top of itself
# (Libs.private, Requires.private: NVRTC, fmt, SQLite, dl, threads, and the C++ runtime for C
# programs); the shared library records its own dependencies. nlohmann/json is header-only and
# private; cuda.h is public, hence the CUDA include directory in Cflags.
# Paths are relative to the file (${pcfiledir}), so an install moved with --prefix still works.
set(FP8JIT_PC_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
function(fp8jit_pc_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
if(IS_ABSOLUTE "${FP8JIT_PC_DIR}")
  set(FP8JIT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH rel "/root/${FP8JIT_PC_DIR}" "/root")
  string(REGEX REPLACE "/$" "" rel "${rel}")
  set(FP8JIT_PC_PREFIX "\${pcfiledir}/${rel}")
endif()
fp8jit_pc_path(FP8JIT_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
fp8jit_pc_path(FP8JIT_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")

list(TRANSFORM CUDAToolkit_INCLUDE_DIRS PREPEND "-I" OUTPUT_VARIABLE cuda_cflags)
list(JOIN cuda_cflags " " FP8JIT_PC_CUDA_CFLAGS)
get_target_property(nvrtc CUDA::nvrtc IMPORTED_LOCATION)
get_filename_component(nvrtc_dir "${nvrtc}" DIRECTORY)
set(private_libs "-L${nvrtc_dir}" -lnvrtc ${CMAKE_THREAD_LIBS_INIT})
foreach(lib IN LISTS CMAKE_DL_LIBS)
  list(APPEND private_libs "-l${lib}")
endforeach()
# The C++ standard library (and libm) the C++ driver adds by itself, for C programs.
foreach(lib IN LISTS CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
  if(lib MATCHES "^(stdc\\+\\+|c\\+\\+|c\\+\\+abi|m)$")
    list(APPEND private_libs "-l${lib}")
  endif()
endforeach()
list(REMOVE_DUPLICATES private_libs)
list(JOIN private_libs " " FP8JIT_PC_LIBS_PRIVATE)

configure_file(${CMAKE_CURRENT_LIST_DIR}/fp8jit.pc.in "${CMAKE_BINARY_DIR}/fp8jit.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/fp8jit.pc" DESTINATION ${FP8JIT_PC_DIR})
