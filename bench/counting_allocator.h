// Counts the bytes the process holds through operator new, so a benchmark can report memory per
// item. Replaces the global operator new and delete of the program it is linked into.
#ifndef FAIRGATE_BENCH_COUNTING_ALLOCATOR_H_
#define FAIRGATE_BENCH_COUNTING_ALLOCATOR_H_

#include <cstdint>

namespace fairgate::bench {

// Bytes currently allocated through operator new (usable size, as malloc rounds up).
std::int64_t BytesInUse();

}  // namespace fairgate::bench

#endif  // FAIRGATE_BENCH_COUNTING_ALLOCATOR_H_
