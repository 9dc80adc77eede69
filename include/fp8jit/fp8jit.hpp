// fp8jit: run-time generated FP8 kernels for NVIDIA Hopper.
#pragma once

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/log.hpp"
#include "fp8jit/models.hpp"
#include "fp8jit/runtime.hpp"
#include "fp8jit/types.hpp"
#include "fp8jit/version.hpp"
