# Checks libfp8jit.so's dynamic symbol table against the public API: the C ABI (fp8jit_*) and,
# in namespace fp8jit, namespace-scope functions, members of the public classes (capitalised:
# Runtime, KernelSpec, Error ...) and the public sub-namespaces fp8 and reference. Anything else
# (fmt::, nlohmann::, sqlite3_*, fp8jit's internal namespaces such as fp8jit::ops or
# fp8jit::detail, a missing FP8JIT_API) fails, listed. Also checks the SONAME.
# Arguments: -DLIBRARY=path -DNM=nm -DREADELF=readelf -DSONAME=libfp8jit.so.MAJOR
execute_process(COMMAND "${NM}" -D --defined-only -C "${LIBRARY}"
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIBRARY} failed: ${rc}")
endif()
string(REPLACE "\n" ";" lines "${out}")
# A function returning std::string demangles with its ABI tag: "name[abi:cxx11](".
set(fn "[a-z_0-9]+(\\[abi:cxx11\\])?\\(")
set(public_cxx "^(typeinfo for |typeinfo name for |vtable for )?fp8jit::((fp8|reference)::${fn}|[A-Z][A-Za-z0-9]*(::|$)|${fn})")
set(bad "")
set(count 0)
foreach(line IN LISTS lines)
  # "ADDRESS TYPE NAME": the name may contain spaces (demangled signatures).
  if(NOT line MATCHES "^[0-9a-f]+ [A-Za-z] (.*)$")
    continue()
  endif()
  set(name "${CMAKE_MATCH_1}")
  math(EXPR count "${count} + 1")
  if(NOT name MATCHES "^fp8jit_[a-z0-9_]+$" AND NOT name MATCHES "${public_cxx}")
    string(APPEND bad "  ${name}\n")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "${LIBRARY} exports symbols outside fp8jit's public API (a missing hidden "
                      "visibility, or an internal declaration marked FP8JIT_API):\n${bad}")
endif()
foreach(needed "fp8jit_version" "fp8jit::Runtime::Runtime(" "typeinfo for fp8jit::Error" "fp8jit::fp8::from_float(")
  string(FIND "${out}" "${needed}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${LIBRARY} does not export ${needed}: is FP8JIT_API on its declaration?")
  endif()
endforeach()

execute_process(COMMAND "${READELF}" -d "${LIBRARY}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT dyn MATCHES "\\(SONAME\\) +Library soname: \\[([^]]+)\\]")
  message(FATAL_ERROR "${READELF} -d ${LIBRARY}: no SONAME (${rc})")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL SONAME)
  message(FATAL_ERROR "${LIBRARY}: SONAME ${CMAKE_MATCH_1}, expected ${SONAME}")
endif()
message(STATUS "${LIBRARY}: SONAME ${SONAME}, ${count} symbols exported, all public API")
