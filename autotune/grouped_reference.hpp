// The float64 reference of a grouped (mixture-of-experts) GEMM, group by group, and the check of
// an output against it: every group's rows against the reference of its slice of A times its B,
// every row outside the groups still poisoned. Shared by the grouped sweep and `fp8jit gemm
// --groups`. Needs a GPU; includes nothing of the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8jit/args.hpp"

namespace fp8jit {

// Rows [first, last) of A and D that group `group` owns.
struct GroupRows {
  std::int64_t group = 0, first = 0, last = 0;
};

// The rows of every non-empty group of a host copy of the group table (contiguous: groups + 1
// offsets; masked: groups counts). Throws Error(invalid_argument) naming the first entry out of
// range: the kernel would clamp it, and the reference could not say what a clamped table means.
std::vector<GroupRows> group_rows_of(const GroupedGemmArgs& a, const std::vector<int>& table);

struct GroupedCheck {
  double worst_error = 0;         // the worst group's relative error; +inf for NaN or inf in D
  std::int64_t worst_group = -1;  // -1: no group has rows
  std::int64_t stray_rows = 0;    // rows outside every group that were written
  std::int64_t first_stray = -1;
  // "" when every group is within `tolerance` and no row outside them was written; else why not.
  std::string failure(double tolerance) const;
};

class GroupedReference {
 public:
  // `a`: normalized arguments (leading dimensions filled in) on device memory; the group table
  // is read from the device once, here, and the reference computed for every group.
  explicit GroupedReference(const GroupedGemmArgs& a);

  const std::vector<GroupRows>& groups() const { return groups_; }  // the non-empty ones
  std::int64_t valid_rows() const { return valid_rows_; }
  std::int64_t total_rows() const;  // rows of A and D: contiguous m, masked groups * m

  // Fills D with 0xFF bytes (NaN in every output type), synchronously: run it before the GEMM
  // that check() is to judge, so that a row left unwritten cannot pass and a stray write shows.
  void poison_d() const;
  // Downloads D and compares it with the reference.
  GroupedCheck check() const;

 private:
  GroupedGemmArgs a_;
  std::vector<GroupRows> groups_;
  std::int64_t valid_rows_ = 0;
  std::vector<double> ref_;  // the groups' rows one after another, n doubles each
};

}  // namespace fp8jit
