// The Submit intake: where a Submit leaves its job, without taking the scheduler's lock, for
// whoever holds that lock next to queue in the core. Internal to fairgate.
//
// Why: a burst of Submits from one thread into a busy pool waited for the scheduler's lock behind
// the workers completing jobs (1.5-2.3 µs per call on the 2-core VM, most of it waiting and being
// woken). A Submit needs no answer from the core when the scheduler can judge its request without
// it (a registered type without a queue-wait limit, a non-empty id, a valid cost hint, no
// pending bound): it pushes the job here and returns. The AdmissionTable (admission_table.h) takes
// the intake every time it takes its lock, before anything else, so a caller's later calls find its
// earlier Submits queued, in the order they were pushed; and after releasing its lock it looks
// again, so an entry pushed while the lock was held is never left behind (src/runtime/README.md,
// "The Submit intake").
//
// IntakeStack is a multi-producer stack (Treiber's): Push is one compare-and-swap, TakeAll one
// exchange that takes every entry at once and hands them back oldest first. It never reads an
// entry another thread may free, so it needs no hazard pointers: only the taker frees entries.
//
// GrowOnlyNameSet is the set of type names whose Submits may use the intake, readable without
// the scheduler's lock: each Add publishes a new immutable copy (types are registered a handful
// of times per scheduler, Contains is called on every Submit), and the old copies are kept until
// the set is destroyed, since a reader may still hold one.
//
// Thread safety: Push, size and Contains from any thread; TakeAll from one thread at a time (the
// scheduler calls it under its lock); Add from one thread at a time (under the scheduler's lock).
#ifndef FAIRGATE_RUNTIME_SUBMIT_INTAKE_H_
#define FAIRGATE_RUNTIME_SUBMIT_INTAKE_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace fairgate::internal {

// `Entry` has a member `Entry* next` that the stack owns while the entry is in it. `Deleter`, a
// type default-constructed where it is used, disposes of the entries of FreeList and of those
// the stack still holds when it is destroyed.
template <typename Entry, typename Deleter = std::default_delete<Entry>>
class IntakeStack {
 public:
  IntakeStack() = default;
  IntakeStack(const IntakeStack&) = delete;
  IntakeStack& operator=(const IntakeStack&) = delete;
  ~IntakeStack() { FreeList(TakeAll()); }

  // Adds `entry` and returns about how many entries the stack holds with it (at least as many
  // as it holds, counting Pushes under way on other threads). A pusher that looks at the
  // scheduler's lock next puts StoreLoadFence (below) between the two.
  std::size_t Push(std::unique_ptr<Entry, Deleter> entry) {
    // Counted before it is pushed, so that the count is never below what the stack holds.
    const std::size_t waiting = size_.fetch_add(1, std::memory_order_relaxed) + 1;
    Entry* e = entry.release();
    e->next = head_.load(std::memory_order_relaxed);
    while (!head_.compare_exchange_weak(e->next, e, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
    }
    return waiting;
  }

  // Whether the stack holds nothing, seen after every write before this call in the
  // sequentially consistent order.
  bool empty() const { return head_.load(std::memory_order_seq_cst) == nullptr; }
  // About how many entries it holds, at least as many as it does (exact when no Push or TakeAll
  // runs).
  std::size_t size() const { return size_.load(std::memory_order_relaxed); }

  // Takes every entry, and returns them linked through `next`, oldest first (null when empty).
  // The caller owns them.
  Entry* TakeAll() {
    if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    Entry* taken = head_.exchange(nullptr, std::memory_order_acquire);
    Entry* oldest_first = nullptr;
    std::size_t n = 0;
    while (taken != nullptr) {
      Entry* next = taken->next;
      taken->next = oldest_first;
      oldest_first = taken;
      taken = next;
      ++n;
    }
    size_.fetch_sub(n, std::memory_order_relaxed);
    return oldest_first;
  }

  // Frees a list TakeAll returned.
  static void FreeList(Entry* list) {
    while (list != nullptr) std::unique_ptr<Entry, Deleter> entry(std::exchange(list, list->next));
  }

 private:
  // A line of their own: pushers write them, and lock holders read them after every release.
  alignas(64) std::atomic<Entry*> head_{nullptr};
  std::atomic<std::size_t> size_{0};
};

// A sequentially consistent fence: between a Push and a look at the scheduler's lock, and between
// a release of that lock and a look at the stack, so that the two sides cannot both miss each
// other (Dekker's pattern, one fence on each side). ThreadSanitizer does not model fences (GCC
// warns of them); under it, a read-modify-write of a thread's own atomic stands in, a full
// barrier on x86 as the fence is.
inline void StoreLoadFence() {
#if defined(__SANITIZE_THREAD__)
  thread_local std::atomic<int> barrier{0};
  barrier.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

class GrowOnlyNameSet {
 public:
  using Set = absl::flat_hash_set<std::string>;

  GrowOnlyNameSet() {
    versions_.push_back(std::make_unique<const Set>());
    current_.store(versions_.back().get(), std::memory_order_release);
  }
  GrowOnlyNameSet(const GrowOnlyNameSet&) = delete;
  GrowOnlyNameSet& operator=(const GrowOnlyNameSet&) = delete;

  void Add(std::string_view name) {
    const Set& current = *versions_.back();
    if (current.contains(absl::string_view(name.data(), name.size()))) return;
    auto next = std::make_unique<Set>(current);
    next->emplace(name);
    versions_.push_back(std::move(next));
    current_.store(versions_.back().get(), std::memory_order_release);
  }

  bool Contains(std::string_view name) const {
    return current_.load(std::memory_order_acquire)
        ->contains(absl::string_view(name.data(), name.size()));
  }

 private:
  std::vector<std::unique_ptr<const Set>> versions_;  // the writer's; the last is current_
  std::atomic<const Set*> current_{nullptr};
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_SUBMIT_INTAKE_H_
