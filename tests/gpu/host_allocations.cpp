// The replacement operator new/delete of the GPU test binary: malloc and free, plus a per-thread
// count (other threads, e.g. a driver's, must not disturb a test that counts its own calls).
#include "tests/gpu/host_allocations.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::uint64_t allocations = 0;

void* counted(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

namespace fp8jit::test {
std::uint64_t host_allocations() { return allocations; }
}  // namespace fp8jit::test

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
