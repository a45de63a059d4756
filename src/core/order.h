// The admission order, declared once. Internal to src/core.
//
// Among the admissible jobs of one effective tier (a tier's aged-in jobs are considered before
// its own; docs/ordering.md), the job that goes next is the least in
//
//   ( reservation rank, key's accumulated cost, sjf, arrival, enqueue sequence )
//
// where the rank is 0 while the job's key runs fewer than its min_running and 1 otherwise, and
// sjf is the job's estimated cost when its type is shortest-first, else 0. The first two fields
// are the key's place (KeyPlace: every job of a key shares it), the last three the job's place
// within its key (JobPlace). Sequences are unique, so no two jobs compare equal.
//
// Every comparison in the core derives from these types' defaulted `<=>`: a lane's ready jobs are
// ordered by JobPlace, a set of lanes by the whole AdmissionOrder of each lane's head, and the
// compact lane entries of queue_nodes.h compare by expanding to the same AdmissionOrder. Doubles
// are stored as SortableBits, so comparisons are integer compares and -0.0 equals 0.0.
#ifndef FAIRGATE_CORE_ORDER_H_
#define FAIRGATE_CORE_ORDER_H_

#include <bit>
#include <compare>
#include <cstdint>

namespace fairgate::core {

// A double as an unsigned integer that sorts the same way (and -0.0 with 0.0).
constexpr std::uint64_t SortableBits(double d) {
  if (d == 0) d = 0;
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(d);
  return (bits >> 63) ? ~bits : bits | (std::uint64_t{1} << 63);
}

// The rank of a key that is not reserved, and the sjf of a job whose type is not shortest-first.
inline constexpr std::uint64_t kUnreservedRank = 1;
inline constexpr std::uint64_t kNoSjf = SortableBits(0.0);

struct KeyPlace {
  std::uint64_t rank = kUnreservedRank;
  std::uint64_t acc = 0;  // SortableBits
  friend auto operator<=>(const KeyPlace&, const KeyPlace&) = default;
};

struct JobPlace {
  std::uint64_t sjf = 0;      // SortableBits
  std::uint64_t arrival = 0;  // SortableBits
  std::uint64_t seq = 0;
  friend auto operator<=>(const JobPlace&, const JobPlace&) = default;
};

struct AdmissionOrder {
  KeyPlace key;
  JobPlace job;
  friend auto operator<=>(const AdmissionOrder&, const AdmissionOrder&) = default;
};

static_assert(sizeof(JobPlace) == 24 && sizeof(AdmissionOrder) == 40,
              "the order's fields are copied into every B-tree entry: keep them packed");

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_ORDER_H_
