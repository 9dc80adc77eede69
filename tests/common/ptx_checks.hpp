// Checks on generated PTX shared by the compile tests.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>

namespace fp8jit::test {

// Whether a PTX instruction (predicate stripped) may read or write global memory: TMA and
// cp.async copies always do; loads, stores, atomics and reductions unless their state space is
// shared, param, local or const (generic addresses may be global).
inline bool touches_global(std::string_view ins) {
  if (ins.rfind("cp.async", 0) == 0)
    return ins.rfind("cp.async.bulk.commit", 0) != 0 && ins.rfind("cp.async.bulk.wait", 0) != 0 &&
           ins.rfind("cp.async.commit", 0) != 0 && ins.rfind("cp.async.wait", 0) != 0 &&
           ins.rfind("cp.async.mbarrier", 0) != 0;
  for (const char* op : {"ld.", "st.", "atom.", "red."})
    if (ins.rfind(op, 0) == 0) {
      for (const char* space : {".shared", ".param", ".local", ".const"})
        if (ins.find(space) != std::string_view::npos) return false;
      return true;
    }
  return false;
}

// Every entry point of `ptx` waits for the grids it depends on (griddepcontrol.wait: programmatic
// dependent launch) before its first instruction that may touch global memory, and signals its
// dependents (griddepcontrol.launch_dependents). Returns the number of entry points checked.
inline int expect_grid_dependency_wait_first(const std::string& ptx) {
  std::istringstream in(ptx);
  std::string line, entry;
  bool waited = false, signalled = false;
  int entries = 0;
  auto close = [&] {
    if (entry.empty()) return;
    EXPECT_TRUE(waited) << entry << ": no griddepcontrol.wait";
    EXPECT_TRUE(signalled) << entry << ": no griddepcontrol.launch_dependents";
  };
  while (std::getline(in, line)) {
    std::string_view s(line);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    if (s.rfind(".visible .entry", 0) == 0 || s.rfind(".entry", 0) == 0) {
      close();
      entry = std::string(s.substr(0, s.find('(')));
      waited = signalled = false;
      ++entries;
      continue;
    }
    if (entry.empty()) continue;
    if (s.rfind("@", 0) == 0) s.remove_prefix(std::min(s.size(), s.find(' ') + 1));  // a predicate
    if (s.rfind("griddepcontrol.wait", 0) == 0) waited = true;
    if (s.rfind("griddepcontrol.launch_dependents", 0) == 0) signalled = true;
    if (!waited && touches_global(s)) {
      ADD_FAILURE() << entry << ": global access before griddepcontrol.wait: " << s;
      waited = true;  // one report per entry
    }
  }
  close();
  return entries;
}

}  // namespace fp8jit::test
