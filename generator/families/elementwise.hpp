// Pieces shared by the quantize and dequantize families (both are element-wise over [M, K]).
#pragma once

#include <string>

#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/types.hpp"
#include "generator/family.hpp"

namespace fp8jit::elementwise {

// Device enumerator spellings (templates/fp8jit/common/defs.cuh). Generated source only ever
// contains these fixed identifiers and integers, never text taken from a spec.
const char* dev_elem(DType d);
const char* dev_fp8(Fp8Format f);
const char* dev_gran(Granularity g);

DType dtype_param(const KernelSpec& spec, const std::string& key);
Fp8Format format_param(const KernelSpec& spec, const std::string& key);
Granularity granularity_param(const KernelSpec& spec);

// "" if vec/threads/unroll fit together for an element of `elem_bytes`, else the reason.
std::string check_config(const KernelSpec& spec);
// "_v8_t256_u2"
std::string config_suffix(const KernelSpec& spec);
// The config ParamDefs (vec, threads, unroll).
void add_config_params(std::vector<ParamDef>& params);

}  // namespace fp8jit::elementwise
