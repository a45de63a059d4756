// GroupedWrites: calls that each write one item, made at once from many threads, share one write
// of all of them (group commit, without waiting for a group to fill). Internal to src/store: the
// PostgreSQL store's AddJob stands on it, so that jobs stored from many threads at once share one
// statement, its commit and fsync, and one notification of the replicas.
//
// A call that finds no write under way and none waiting writes its item at once, alone
// (WriteOne): a caller alone pays one uncontended mutex for the grouping. Any other call queues
// its item and waits; once no write is under way, the first waiting call to take the mutex
// writes every item queued by then, in queue order, as one batch (WriteBatch; WriteOne if it is
// alone), and answers each of them. A batch that fails as a whole (one item the server refuses
// fails the statement) is not charged to its callers: each of them then writes its own item
// alone, outside any group, so that an item that cannot be written fails its own caller only.
// (A failure of the server itself is then met once more per caller, as without the grouping.)
//
// Thread safety: Write may be called from any thread at once. The writes run on the callers'
// threads, one group at a time, with no lock of this class held; a waiting call blocks its
// thread (as the round trip it shares would have).
#ifndef FAIRGATE_STORE_GROUPED_WRITES_H_
#define FAIRGATE_STORE_GROUPED_WRITES_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fairgate/status.h"

namespace fairgate::store {

template <typename Item, typename Out>
class GroupedWrites {
 public:
  // Writes one item (one statement, one commit).
  using WriteOne = std::function<StatusOr<Out>(const Item& item)>;
  // Writes the items in one statement and commit, and answers one Out per item, in their order;
  // or fails, and writes none of them.
  using WriteBatch = std::function<StatusOr<std::vector<Out>>(const std::vector<const Item*>&)>;

  GroupedWrites(WriteOne one, WriteBatch batch) : one_(std::move(one)), batch_(std::move(batch)) {}
  GroupedWrites(const GroupedWrites&) = delete;
  GroupedWrites& operator=(const GroupedWrites&) = delete;

  // Writes `item`, alone or in a group, and returns once its group's write is done: its answer,
  // or, when its group's write failed, the answer of its own write alone.
  StatusOr<Out> Write(const Item& item) {
    Call me{&item, std::nullopt, false};
    std::unique_lock lock(mutex_);
    if (!writing_ && queue_.empty()) {
      writing_ = true;
      lock.unlock();
      StatusOr<Out> out = one_(item);
      lock.lock();
      EndWrite(lock);
      return out;
    }
    queue_.push_back(&me);
    written_.wait(lock, [&] { return me.answer || me.alone || !writing_; });
    if (!me.answer && !me.alone) {
      WriteQueued(lock);  // no write under way, and `me` is queued: it writes the group
    } else {
      lock.unlock();
    }
    if (me.answer) return *std::move(me.answer);
    return one_(item);
  }

  // The calls queued for the next group's write (tests wait on it).
  std::size_t Queued() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }

 private:
  struct Call {
    const Item* item;
    std::optional<StatusOr<Out>> answer;  // set by its group's writer
    bool alone = false;                   // its group failed: it writes its item itself
  };

  // Writes the queued calls' items as one group; called with `lock` held and no write under way,
  // and returns with it released.
  void WriteQueued(std::unique_lock<std::mutex>& lock) {
    writing_ = true;
    std::vector<Call*> group;
    group.swap(queue_);
    lock.unlock();
    if (group.size() == 1) {
      StatusOr<Out> out = one_(*group[0]->item);
      lock.lock();
      group[0]->answer = std::move(out);
    } else {
      std::vector<const Item*> items;
      items.reserve(group.size());
      for (const Call* call : group) items.push_back(call->item);
      StatusOr<std::vector<Out>> outs = batch_(items);
      lock.lock();
      if (!outs.ok()) {
        for (Call* call : group) call->alone = true;
      } else if (outs->size() != group.size()) {
        const Status wrong = absl::InternalError(
            absl::StrCat("a group of ", group.size(), " writes answered ", outs->size(), " times"));
        for (Call* call : group) call->answer = wrong;
      } else {
        for (std::size_t i = 0; i < group.size(); ++i) group[i]->answer = std::move((*outs)[i]);
      }
    }
    EndWrite(lock);
  }

  // Ends a write; called with `lock` held, and returns with it released. The waiting calls are
  // woken once the mutex is free (woken under it, each would find it held): those the write
  // answered return, and the first of the others to take the mutex writes the next group.
  void EndWrite(std::unique_lock<std::mutex>& lock) {
    writing_ = false;
    lock.unlock();
    written_.notify_all();
  }

  const WriteOne one_;
  const WriteBatch batch_;
  mutable std::mutex mutex_;  // guards queue_, writing_ and the queued calls' answers
  std::condition_variable written_;
  std::vector<Call*> queue_;
  bool writing_ = false;
};

}  // namespace fairgate::store

#endif  // FAIRGATE_STORE_GROUPED_WRITES_H_
