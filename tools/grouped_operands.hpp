// Grouped GEMM operands for the CLI's GPU commands (`gemm --groups`, `tune` of a grouped suite): a
// seeded random routing of rows to groups, and random activations and per-group weights quantized
// on the GPU as for dense GEMMs (tools/operands.hpp).
#pragma once

#include <memory>
#include <vector>

#include "autotune/timer.hpp"
#include "fp8jit/runtime.hpp"
#include "tools/shapes.hpp"

namespace fp8jit::cli {

// The group table of a ragged, seeded routing. Contiguous: groups + 1 offsets from 0 to s.m, the
// sizes spread around s.m / groups, some groups empty (one at least, from 3 groups on).
// Masked: groups counts in [0, s.m] around expected_rows(s), some 0 and, from 4 groups on, one
// full group (s.m).
std::vector<int> random_routing(const GroupedShape& s, unsigned seed);

// A second, wider draw of masked rows per group: uniform in [0, 2 x expected_rows(s)], within
// [0, s.m] (the peers benchmark draws them so). `fp8jit tune` times masked candidates on both
// (TuneOptions::more_group_rows), so that a winner must hold on two routings.
std::vector<int> uniform_masked_routing(const GroupedShape& s, unsigned seed);

// The arguments of a grouped shape and problem, without operands: leading dimensions dense,
// expected_m filled in (expected_rows), scale layouts as the dense CLI uses them.
GroupedGemmArgs grouped_gemm_args(const GemmProblem& problem, const GroupedShape& s);

struct GroupedOperands {
  std::unique_ptr<DeviceBuffer> a, b, scale_a, scale_b, table, d;
  std::vector<int> table_host;  // what `table` holds
};

// Fills g's operand pointers, scale sizes and group table (from random_routing with `seed`) and
// allocates D. A's scales cover all of A's rows; each group's B is quantized on its own, with its
// own scales (GroupedGemmArgs). The buffers live as long as the returned object.
GroupedOperands make_grouped_operands(Runtime& rt, GroupedGemmArgs& g, unsigned seed);

}  // namespace fp8jit::cli
