# Installs the build tree into a scratch prefix, then configures and builds the consumer project
# (tests/consumer/CMakeLists.txt) against it and runs each program. The *static programs must not
# need libfp8jit.so; the *shared ones must, by its SONAME.
# Arguments: -DSOURCE_DIR -DBUILD_DIR -DWORK_DIR -DDEFAULT_FLAVOUR=static|shared
#            -DSONAME=libfp8jit.so.MAJOR
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed: ${rc}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}"
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
# Only this prefix's fp8jit.pc, not one installed on the machine.
file(GLOB_RECURSE pc_files "${prefix}/*/fp8jit.pc")
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
run("consumer configure" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
  -DCMAKE_PREFIX_PATH=${prefix} -DDEFAULT_FLAVOUR=${DEFAULT_FLAVOUR})
run("consumer build" ${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j2)

find_program(READELF readelf)
foreach(program consumer consumer_static consumer_shared consumer_c_shared consumer_pc_shared
                consumer_cpp_pc_static consumer_c_pc_static)
  run("${program}" "${WORK_DIR}/build/${program}")
  if(NOT READELF)
    continue()
  endif()
  execute_process(COMMAND ${READELF} -d "${WORK_DIR}/build/${program}" OUTPUT_VARIABLE dyn)
  string(REGEX MATCH "Shared library: \\[libfp8jit[^]]*\\]" needed "${dyn}")
  if(program MATCHES "static$" OR (program STREQUAL "consumer" AND DEFAULT_FLAVOUR STREQUAL "static"))
    set(want "")
  else()
    set(want "Shared library: [${SONAME}]")
  endif()
  if(NOT needed STREQUAL want)
    message(FATAL_ERROR "${program} needs \"${needed}\", expected \"${want}\"")
  endif()
endforeach()
