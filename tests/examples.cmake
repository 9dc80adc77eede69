# The examples (examples/): a C++ and a C program that quantize and run a block-scaled FP8 GEMM on
# a Hopper GPU, checked against the host. Without one they print "no GPU: skipping" and exit 77,
# which ctest reports as skipped. Included from tests/CMakeLists.txt.
enable_language(C)

set(FP8JIT_EXAMPLES_DIR ${CMAKE_SOURCE_DIR}/examples)

add_executable(example_quantize_gemm_cpp ${FP8JIT_EXAMPLES_DIR}/quantize_gemm.cpp)
target_link_libraries(example_quantize_gemm_cpp PRIVATE fp8jit::fp8jit CUDA::cudart)

# The C example links the C++ library: link with the C++ driver so libstdc++ comes along.
add_executable(example_quantize_gemm_c ${FP8JIT_EXAMPLES_DIR}/quantize_gemm.c)
set_target_properties(example_quantize_gemm_c PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON
  C_EXTENSIONS OFF LINKER_LANGUAGE CXX)
target_link_libraries(example_quantize_gemm_c PRIVATE fp8jit::fp8jit CUDA::cudart)
if(UNIX)
  target_link_libraries(example_quantize_gemm_c PRIVATE m)
endif()

foreach(lang cpp c)
  add_test(NAME example_quantize_gemm_${lang} COMMAND example_quantize_gemm_${lang})
  set_tests_properties(example_quantize_gemm_${lang} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

# fp8jit.h must compile as strict C99: a C++-ism in the header breaks the build here.
add_library(fp8jit_c_header_check STATIC ${FP8JIT_EXAMPLES_DIR}/c_header_check.c)
target_include_directories(fp8jit_c_header_check PRIVATE ${CMAKE_SOURCE_DIR}/include
  ${FP8JIT_GENERATED_INCLUDE_DIR})
set_target_properties(fp8jit_c_header_check PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON
  C_EXTENSIONS OFF)
target_compile_options(fp8jit_c_header_check PRIVATE -std=c99 -Wall -Wextra -Werror -pedantic)
