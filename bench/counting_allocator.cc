#include "counting_allocator.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace fairgate::bench {
namespace {
std::atomic<std::int64_t> bytes_in_use{0};
}  // namespace

std::int64_t BytesInUse() { return bytes_in_use.load(std::memory_order_relaxed); }

}  // namespace fairgate::bench

namespace {

void* Allocate(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  fairgate::bench::bytes_in_use.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p)),
                                          std::memory_order_relaxed);
  return p;
}

void Release(void* p) {
  if (p == nullptr) return;
  fairgate::bench::bytes_in_use.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)),
                                          std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t size) { return Allocate(size); }
void* operator new[](std::size_t size) { return Allocate(size); }
void operator delete(void* p) noexcept { Release(p); }
void operator delete[](void* p) noexcept { Release(p); }
void operator delete(void* p, std::size_t) noexcept { Release(p); }
void operator delete[](void* p, std::size_t) noexcept { Release(p); }
