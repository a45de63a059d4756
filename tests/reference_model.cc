#include "reference_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

namespace fairgate::testing {

Status ReferenceModel::RegisterType(const std::string& name, const JobTypeConfig& config) {
  if (Status s = ValidateJobType(name, config); !s.ok()) return s;
  auto it = types_.find(name);
  if (it != types_.end()) {
    return it->second == config ? absl::OkStatus() : absl::AlreadyExistsError("different config");
  }
  if (config.slots > options_.rule.max_concurrency) return absl::InvalidArgumentError("slots");
  for (const auto& [other_name, other] : types_) {
    if (!config.conflict_group.empty() && other.conflict_group == config.conflict_group &&
        other.conflict_limit != config.conflict_limit) {
      return absl::InvalidArgumentError("conflict_limit");
    }
  }
  types_[name] = config;
  type_rates_[name] = {config.rate_limit.burst, 0};
  type_order_.push_back(name);
  return absl::OkStatus();
}

Status ReferenceModel::AddWorker(const std::string& name, const WorkerConfig& config) {
  if (Status s = ValidateWorker(name, config); !s.ok()) return s;
  auto it = workers_.find(name);
  if (it != workers_.end()) {
    return it->second.config == config ? absl::OkStatus() : absl::AlreadyExistsError("worker");
  }
  workers_[name] = {config, workers_added_++};
  workers_in_use_ = true;
  return absl::OkStatus();
}

Status ReferenceModel::UpdateWorker(const std::string& name, const WorkerConfig& config) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return absl::NotFoundError("worker");
  if (Status s = ValidateWorker(name, config); !s.ok()) return s;
  it->second.config = config;
  return absl::OkStatus();
}

StatusOr<std::vector<int>> ReferenceModel::RemoveWorker(const std::string& name, double now) {
  if (!std::isfinite(now)) return absl::InvalidArgumentError("now");
  if (!workers_.count(name)) return absl::NotFoundError("worker");
  std::vector<int> lost;
  for (const auto& [n, job] : jobs_) {
    if (job.running && job.worker == name) lost.push_back(n);
  }
  for (int n : lost) {
    const std::string key = jobs_[n].key;
    jobs_.erase(n);
    MaybeIdle(key, now);
  }
  workers_.erase(name);
  return lost;
}

bool ReferenceModel::Serves(const ModelWorker& worker, const std::string& type) const {
  const WorkerConfig& w = worker.config;
  if (w.slots < types_.at(type).slots) return false;  // it could never hold one of its jobs
  if (std::find(w.types.begin(), w.types.end(), type) != w.types.end()) return true;
  for (const std::string& tag : types_.at(type).tags) {
    if (std::find(w.tags.begin(), w.tags.end(), tag) != w.tags.end()) return true;
  }
  return false;
}

std::vector<std::string> ReferenceModel::WorkersOf(const std::string& type) const {
  std::vector<std::tuple<std::size_t, std::uint64_t, std::string>> found;
  for (const auto& [name, worker] : workers_) {
    if (!Serves(worker, type)) continue;
    std::size_t served = 0;
    for (const auto& [other, config] : types_) served += Serves(worker, other);
    found.emplace_back(served, worker.added, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (const auto& f : found) names.push_back(std::get<2>(f));
  return names;
}

int ReferenceModel::FreeSlots(const std::string& worker) const {
  int used = 0;
  for (const auto& [n, job] : jobs_) {
    if (job.running && job.worker == worker) used += types_.at(job.type).slots;
  }
  return workers_.at(worker).config.slots - used;
}

bool ReferenceModel::KeyBusy(const std::string& key) const {
  for (const auto& [n, job] : jobs_) {
    if (job.key == key) return true;
  }
  return false;
}

double ReferenceModel::NextTokenAt(const RateLimit& limit, const Bucket& bucket) {
  double t = bucket.at + (1 - bucket.tokens) / limit.per_second;
  while (!HasToken(limit, bucket, t))
    t = std::nextafter(t, std::numeric_limits<double>::infinity());
  return t;
}

StatusOr<int> ReferenceModel::Enqueue(const std::string& type, const std::string& id,
                                      const std::string& key, std::optional<double> cost,
                                      double now, Join join, bool refuse) {
  if (!std::isfinite(now)) return absl::InvalidArgumentError("now");
  auto type_it = types_.find(type);
  if (type_it == types_.end()) return absl::NotFoundError("type");
  if (id.empty()) return absl::InvalidArgumentError("id");
  if (cost && (!std::isfinite(*cost) || *cost < 0)) return absl::InvalidArgumentError("cost");
  // A joinable request joins the last admitted joinable job of its id if it may and that one
  // still runs, else the pending joinable one of its id, if any.
  const bool joinable = type_it->second.coalesce != Coalesce::kOff && join != Join::kNever;
  if (joinable) {
    if (join == Join::kPendingOrRunning) {
      auto last = last_admitted_joinable_.find({type, id});
      if (last != last_admitted_joinable_.end() && jobs_.count(last->second) &&
          jobs_[last->second].running) {
        return last->second;
      }
    }
    for (auto& [n, job] : jobs_) {
      if (!job.running && job.joinable && job.type == type && job.id == id) {
        ++job.callers;
        return n;
      }
    }
  }
  if (static_cast<std::size_t>(pending()) >= options_.rule.max_pending_total) {
    return absl::ResourceExhaustedError("total");
  }
  std::size_t key_pending = 0;
  for (const auto& [n, job] : jobs_) key_pending += job.key == key && !job.running;
  if (key_pending >= options_.rule.max_pending_per_key) return absl::ResourceExhaustedError("key");
  if (refuse || type_it->second.refuse_without_token) {
    // Every bucket the job is under without a token now; the wait is until the latest's next.
    std::vector<std::pair<RateLimit, Bucket>> buckets = {
        {options_.rule.rate_limit, global_rate_},
        {type_it->second.rate_limit, type_rates_.at(type)}};
    if (keys_.count(key)) buckets.push_back({RateOf(key), KeyBucket(key)});
    bool missing = false;
    double due = now;
    for (const auto& [limit, bucket] : buckets) {
      if (HasToken(limit, bucket, now)) continue;
      missing = true;
      due = std::max(due, std::max(now, NextTokenAt(limit, bucket)));
    }
    if (missing) {
      retry_after_ = due - now;
      return absl::ResourceExhaustedError("no token");
    }
  }
  if (Stands(type, now)) {
    // The call's place, its key as it stands (not tracked: cost 0; its group's by its settings,
    // a group not tracked: cost 0), against the heaviest pending job's: the greater is refused.
    const double key_acc = keys_.count(key) ? keys_.at(key).acc : 0;
    const std::string group = GroupOf(key);
    const double group_acc = group.empty()          ? key_acc
                             : groups_.count(group) ? groups_.at(group).acc
                                                    : 0;
    ShedPlace place;
    const std::optional<int> heaviest = Heaviest(type, &place);
    if (!heaviest || ShedPlace{group_acc, key_acc, now, next_seq_} > place) {
      retry_after_ = type_it->second.shedding.interval.count();
      return absl::ResourceExhaustedError("shed");
    }
    Shed(*heaviest, now);
  }

  if (options_.rule.idle_catch_up) {
    // The least accumulated cost in this tier, among the keys without a group and the groups
    // with jobs pending there (of_group null), or among `of_group`'s keys with jobs there.
    const std::string group = GroupOf(key);
    auto least = [&](const std::string* of_group) {
      std::optional<double> least;
      for (const auto& [n, job] : jobs_) {
        if (job.running || types_[job.type].priority != type_it->second.priority) continue;
        const std::string job_group = GroupOf(job.key);
        if (of_group != nullptr && job_group != *of_group) continue;
        const double acc =
            of_group != nullptr || job_group.empty() ? keys_[job.key].acc : groups_[job_group].acc;
        if (!least || acc < *least) least = acc;
      }
      return least;
    };
    // An idle group catches up among the groups, then an idle key among its group's keys.
    if (!group.empty() && !GroupBusy(group)) {
      if (std::optional<double> floor = least(nullptr)) {
        groups_[group].acc = std::max(groups_[group].acc, *floor);
      }
    }
    if (!KeyBusy(key)) {
      if (std::optional<double> floor = least(group.empty() ? nullptr : &group)) {
        keys_[key].acc = std::max(keys_[key].acc, *floor);
      }
    }
  }
  keys_[key];  // tracked from now on
  TrackGroupOf(key);
  const int n = next_job_++;
  double sjf = 0;
  if (type_it->second.shortest_first || options_.rule.shortest_first) {
    auto est = estimates_.find({type, id});
    sjf = cost ? *cost : est != estimates_.end() ? est->second.value : type_it->second.default_cost;
    sjf += options_.rule.shortest_first_aging * now;
  }
  bool type_pending = false;
  for (const auto& [other_n, other] : jobs_) type_pending |= !other.running && other.type == type;
  if (!type_pending) starved_since_[type] = now;
  ModelJob job{type, id, key, cost, now, next_seq_++, sjf};
  job.paused_since = now;
  job.joinable = joinable;
  jobs_[n] = job;
  ObserveShedding(now);
  return n;
}

Status ReferenceModel::SetCapacity(int capacity) {
  if (capacity < 1 || capacity > options_.rule.max_concurrency) {
    return absl::InvalidArgumentError("capacity");
  }
  capacity_ = capacity;
  return absl::OkStatus();
}

StatusOr<int> ReferenceModel::Callers(int n) const {
  auto it = jobs_.find(n);
  if (it == jobs_.end() || it->second.running) return absl::NotFoundError("job");
  return it->second.callers;
}

Status ReferenceModel::Cancel(int n, double now) {
  auto it = jobs_.find(n);
  if (it == jobs_.end()) return absl::NotFoundError("job");
  if (it->second.running) return absl::FailedPreconditionError("running");
  if (--it->second.callers > 0) return absl::OkStatus();
  const std::string key = it->second.key;
  jobs_.erase(it);
  MaybeIdle(key, now);
  ObserveShedding(now);
  return absl::OkStatus();
}

StatusOr<std::optional<int>> ReferenceModel::ShedHeaviest(const std::string& type, double now) {
  if (types_.find(type) == types_.end()) return absl::NotFoundError("type");
  std::optional<int> heaviest = Heaviest(type, nullptr);
  if (heaviest) {
    const std::string key = jobs_.at(*heaviest).key;
    jobs_.erase(*heaviest);
    MaybeIdle(key, now);
  }
  ObserveShedding(now);
  return heaviest;
}

std::optional<int> ReferenceModel::Heaviest(const std::string& type, ShedPlace* place) const {
  std::optional<int> heaviest;
  ShedPlace most;
  for (const auto& [n, job] : jobs_) {
    if (job.running || job.type != type) continue;
    const std::string group = GroupOf(job.key);
    const double key_acc = keys_.at(job.key).acc;
    const ShedPlace at{group.empty() ? key_acc : groups_.at(group).acc, key_acc, job.arrival,
                       job.seq};
    if (!heaviest || at > most) heaviest = n, most = at;
  }
  if (heaviest && place != nullptr) *place = most;
  return heaviest;
}

void ReferenceModel::Shed(int n, double now) {
  const std::string key = jobs_.at(n).key;
  jobs_.erase(n);
  MaybeIdle(key, now);
  expired_.push_back(n);
}

void ReferenceModel::ObserveShedding(double now) {
  for (const auto& [type, config] : types_) {
    if (config.shedding.target.count() <= 0) continue;
    std::optional<std::pair<double, std::uint64_t>> oldest;
    for (const auto& [n, job] : jobs_) {
      if (job.running || job.type != type) continue;
      if (!oldest || std::make_pair(job.arrival, job.seq) < *oldest) {
        oldest = std::make_pair(job.arrival, job.seq);
      }
    }
    ShedState& state = shed_[type];
    const double target = config.shedding.target.count();
    if (!oldest) {
      state = ShedState{};
    } else if (oldest != state.oldest) {
      if (!state.oldest || now - oldest->first < target) state.late_since = oldest->first + target;
      state.oldest = oldest;
    }
  }
}

bool ReferenceModel::Stands(const std::string& type, double now) const {
  auto it = shed_.find(type);
  return it != shed_.end() && it->second.oldest &&
         now >= it->second.late_since + types_.at(type).shedding.interval.count();
}

double ReferenceModel::Tokens(const RateLimit& limit, const Bucket& bucket, double now) {
  return std::min(limit.burst, bucket.tokens + (now - bucket.at) * limit.per_second);
}

bool ReferenceModel::HasToken(const RateLimit& limit, const Bucket& bucket, double now) {
  return limit.per_second == 0 || Tokens(limit, bucket, now) >= 1;
}

void ReferenceModel::Take(const RateLimit& limit, Bucket& bucket, double now) {
  if (limit.per_second == 0) return;
  bucket = {Tokens(limit, bucket, now) - 1, now};
}

bool ReferenceModel::Admissible(const ModelJob& job, double now, bool borrowing) const {
  // Slots of the global cap and of the tier's, jobs of the type, of the key and on the resource.
  const JobTypeConfig& config = types_.at(job.type);
  int total_slots = 0, tier_slots = 0, type = 0, same_resource = 0;
  for (const auto& [n, other] : jobs_) {
    if (!other.running) continue;
    const JobTypeConfig& other_config = types_.at(other.type);
    total_slots += other_config.slots;
    if (other_config.priority == config.priority) tier_slots += other_config.slots;
    type += other.type == job.type;
    same_resource += !config.conflict_group.empty() && other.id == job.id &&
                     other_config.conflict_group == config.conflict_group;
  }
  const bool tier_room =
      borrowing ? total_slots + config.slots <=
                      capacity_ -
                          static_cast<int>(std::floor(options_.rule.lending->kept_back * capacity_))
                : tier_slots + config.slots <= config.priority;
  return !Paused(job) && total_slots + config.slots <= capacity_ && tier_room &&
         type < config.max_concurrency && RunningOf(job.key) < LimitsOf(job.key).max_running &&
         (GroupOf(job.key).empty() ||
          GroupRunning(GroupOf(job.key)) < GroupLimitsOf(GroupOf(job.key)).max_running) &&
         same_resource < config.conflict_limit &&
         HasToken(options_.rule.rate_limit, global_rate_, now) &&
         HasToken(config.rate_limit, type_rates_.at(job.type), now) &&
         HasToken(RateOf(job.key), KeyBucket(job.key), now);
}

KeyLimits ReferenceModel::LimitsOf(const std::string& key) const {
  auto it = settings_.find(key);
  if (it != settings_.end() && it->second.limits) return *it->second.limits;
  return options_.rule.default_key_limits;
}

RateLimit ReferenceModel::RateOf(const std::string& key) const {
  const KeyLimits limits = LimitsOf(key);
  RateLimit rate = limits.rate_limit;
  if (limits.rate_per_weight) {
    auto it = settings_.find(key);
    rate.per_second *= it != settings_.end() ? it->second.weight : 1.0;
  }
  return rate;
}

int ReferenceModel::GroupRunning(const std::string& group) const {
  int n = 0;
  for (const auto& [i, job] : jobs_) n += job.running && GroupOf(job.key) == group;
  return n;
}

GroupLimits ReferenceModel::GroupLimitsOf(const std::string& group) const {
  auto it = group_limits_.find(group);
  return it != group_limits_.end() ? it->second : options_.rule.default_group_limits;
}

Status ReferenceModel::SetGroupLimits(const std::string& group, const GroupLimits& limits) {
  if (limits.max_running < 1 || limits.min_running < 0 || limits.min_running > limits.max_running ||
      group.empty()) {
    return absl::InvalidArgumentError("group limits");
  }
  group_limits_[group] = limits;
  return absl::OkStatus();
}

int ReferenceModel::RunningOf(const std::string& key) const {
  int n = 0;
  for (const auto& [i, job] : jobs_) n += job.running && job.key == key;
  return n;
}

std::vector<int> ReferenceModel::Priorities() const {
  std::set<int, std::greater<>> p;
  for (const auto& [name, config] : types_) p.insert(config.priority);
  return {p.begin(), p.end()};
}

int ReferenceModel::MaxSteps(int priority) const {
  if (!options_.rule.aging) return 0;
  int steps = 0;
  for (int p : Priorities()) steps += p > priority && p <= options_.rule.aging->ceiling;
  return steps;
}

int ReferenceModel::AgingSteps(const ModelJob& job, double now) const {
  const int most = MaxSteps(types_.at(job.type).priority);
  // A paused job's clock stopped when it was paused.
  const double until = Paused(job) ? job.paused_since : now;
  int k = 0;
  while (k < most && (job.arrival + job.paused_total) + options_.rule.aging->grace.count() +
                             static_cast<double>(k + 1) * options_.rule.aging->interval.count() <=
                         until) {
    ++k;
  }
  return k;
}

StatusOr<double> ReferenceModel::MaxWaitToCeiling(const std::string& type) const {
  auto it = types_.find(type);
  if (it == types_.end()) return absl::NotFoundError("type");
  const int steps = MaxSteps(it->second.priority);
  if (steps == 0) return 0.0;
  return options_.rule.aging->grace.count() + steps * options_.rule.aging->interval.count();
}

std::map<int, std::int64_t> ReferenceModel::AgedIn(double now) const {
  std::map<int, std::int64_t> aged;
  const std::vector<int> priorities = Priorities();
  for (int p : priorities) aged[p] = 0;
  for (const auto& [n, job] : jobs_) {
    if (job.running) continue;
    const int steps = AgingSteps(job, now);
    if (steps == 0) continue;
    const int own = static_cast<int>(
        std::find(priorities.begin(), priorities.end(), types_.at(job.type).priority) -
        priorities.begin());
    ++aged[priorities[own - steps]];
  }
  return aged;
}

Status ReferenceModel::SetKeyWeight(const std::string& key, double weight) {
  if (!(std::isfinite(weight) && weight > 0)) return absl::InvalidArgumentError("weight");
  settings_[key].weight = weight;
  return absl::OkStatus();
}

Status ReferenceModel::Charge(const std::string& key, double cost, double now) {
  if (!std::isfinite(now)) return absl::InvalidArgumentError("now");
  if (!std::isfinite(cost) || cost < 0) return absl::InvalidArgumentError("cost");
  keys_[key].acc += cost / (settings_.count(key) ? settings_[key].weight : 1.0);
  const std::string group = TrackGroupOf(key);
  if (!group.empty()) groups_[group].acc += cost / GroupWeight(group);
  MaybeIdle(key, now);
  return absl::OkStatus();
}

Status ReferenceModel::SetKeyLimits(const std::string& key, const KeyLimits& limits) {
  if (limits.max_running < 1 || limits.min_running < 0 || limits.min_running > limits.max_running) {
    return absl::InvalidArgumentError("limits");
  }
  const RateLimit& rate = limits.rate_limit;
  if (!(std::isfinite(rate.per_second) && rate.per_second >= 0 && std::isfinite(rate.burst) &&
        rate.burst >= 1)) {
    return absl::InvalidArgumentError("rate_limit");
  }
  settings_[key].limits = limits;
  return absl::OkStatus();
}

bool ReferenceModel::Paused(const ModelJob& job) const {
  auto it = settings_.find(job.key);
  return paused_types_.count(job.type) > 0 || (it != settings_.end() && it->second.paused);
}

template <typename Change>
void ReferenceModel::ChangePause(double now, Change change) {
  AdvanceTo(now);
  std::map<int, bool> before;
  for (const auto& [n, job] : jobs_) before[n] = Paused(job);
  change();
  for (auto& [n, job] : jobs_) {
    if (job.running || Paused(job) == before[n]) continue;
    if (before[n]) {
      job.paused_total += now - job.paused_since;
    } else {
      job.paused_since = now;
    }
  }
}

Status ReferenceModel::PauseType(const std::string& type, double now) {
  if (!types_.count(type)) return absl::NotFoundError("type");
  ChangePause(now, [&] { paused_types_.insert(type); });
  return absl::OkStatus();
}

Status ReferenceModel::ResumeType(const std::string& type, double now) {
  if (!types_.count(type)) return absl::NotFoundError("type");
  ChangePause(now, [&] { paused_types_.erase(type); });
  return absl::OkStatus();
}

Status ReferenceModel::PauseKey(const std::string& key, double now) {
  ChangePause(now, [&] { settings_[key].paused = true; });
  return absl::OkStatus();
}

Status ReferenceModel::ResumeKey(const std::string& key, double now) {
  ChangePause(now, [&] { settings_[key].paused = false; });
  return absl::OkStatus();
}

double& ReferenceModel::UseEstimate(const ModelJob& job, double now) {
  auto [it, inserted] = estimates_.try_emplace({job.type, job.id});
  if (inserted) it->second.value = types_[job.type].default_cost;
  it->second.last_used = now;
  it->second.use_order = next_order_++;
  return it->second.value;
}

void ReferenceModel::AdvanceTo(double now) {
  std::vector<std::tuple<double, std::uint64_t, int>> due;  // (limit reached at, seq, job)
  for (const auto& [n, job] : jobs_) {
    const double limit = types_.at(job.type).max_queue_wait.count();
    if (!job.running && limit > 0 && job.arrival + limit <= now) {
      due.emplace_back(job.arrival + limit, job.seq, n);
    }
  }
  std::sort(due.begin(), due.end());
  for (const auto& [at, seq, n] : due) {
    const std::string key = jobs_[n].key;
    jobs_.erase(n);
    MaybeIdle(key, now);
    expired_.push_back(n);
  }
  ObserveShedding(now);
}

std::vector<int> ReferenceModel::TakeExpired() {
  std::vector<int> taken;
  taken.swap(expired_);
  return taken;
}

std::optional<ReferenceModel::Admission> ReferenceModel::NextAdmission(double now) {
  AdvanceTo(now);
  // With workers: the reservations. A type one worker alone serves, starved for long enough,
  // with a job admissible but for workers, reserves that worker for the type of its that
  // starved longest (then registered first): its claimant.
  auto starved_order = [&](const std::string& type) {
    return std::make_pair(
        starved_since_[type],
        std::find(type_order_.begin(), type_order_.end(), type) - type_order_.begin());
  };
  std::map<std::string, std::string> claimant;  // reserved worker -> its claimant type
  if (workers_in_use_) {
    for (const auto& [n, job] : jobs_) {
      if (job.running || !Admissible(job, now)) continue;
      const std::vector<std::string> workers = WorkersOf(job.type);
      if (workers.size() != 1 ||
          now - starved_since_[job.type] < options_.rule.sole_worker_reserve_after.count()) {
        continue;
      }
      auto [it, inserted] = claimant.try_emplace(workers[0], job.type);
      if (!inserted && starved_order(job.type) < starved_order(it->second)) it->second = job.type;
    }
  }
  // A reserved worker with room for its claimant takes the claimant's first job; of several,
  // the claimant that starved longest goes.
  std::string reserved_worker, reserved_type;
  for (const auto& [worker, type] : claimant) {
    if (FreeSlots(worker) < types_.at(type).slots) continue;
    if (reserved_type.empty() || starved_order(type) < starved_order(reserved_type)) {
      reserved_worker = worker;
      reserved_type = type;
    }
  }
  // The worker a job would go to, outside a reservation: the most specialised with room that
  // is not reserved; "" if none.
  auto worker_for = [&](const ModelJob& job) -> std::string {
    for (const std::string& w : WorkersOf(job.type)) {
      if (!claimant.count(w) && FreeSlots(w) >= types_.at(job.type).slots) return w;
    }
    return "";
  };
  // The first admissible job in the order of docs/ordering.md: (-effective priority, aged first,
  // reserved first, accumulated cost, sjf, arrival, seq).
  // With lending, when none is, the first admissible as a borrower.
  const std::vector<int> priorities = Priorities();
  int best = -1;
  bool borrowed = false;
  std::tuple<int, int, int, double, int, double, double, double, std::uint64_t> best_order;
  for (bool borrowing : {false, true}) {
    if (best >= 0 || (borrowing && !options_.rule.lending)) break;
    borrowed = borrowing;
    for (const auto& [n, job] : jobs_) {
      if (job.running || !Admissible(job, now, borrowing)) continue;
      if (!reserved_type.empty() && job.type != reserved_type) continue;
      if (reserved_type.empty() && workers_in_use_ && worker_for(job).empty()) continue;
      const int own = static_cast<int>(
          std::find(priorities.begin(), priorities.end(), types_[job.type].priority) -
          priorities.begin());
      const int steps = options_.rule.aging ? AgingSteps(job, now) : 0;
      const bool reserved = RunningOf(job.key) < LimitsOf(job.key).min_running;
      // The key's group's place, then the key's; a key without a group is a group of its own.
      const std::string group = GroupOf(job.key);
      const int rank = reserved ? 0 : 1;
      const int group_rank = group.empty()                                            ? rank
                             : GroupRunning(group) < GroupLimitsOf(group).min_running ? 0
                                                                                      : 1;
      const double group_acc = group.empty() ? keys_[job.key].acc : groups_[group].acc;
      auto order =
          std::make_tuple(-priorities[own - steps], steps > 0 ? 0 : 1, group_rank, group_acc, rank,
                          keys_[job.key].acc, job.sjf, job.arrival, job.seq);
      if (best < 0 || order < best_order) {
        best = n;
        best_order = order;
      }
    }
  }
  if (best < 0) return std::nullopt;
  ModelJob& job = jobs_[best];
  if (workers_in_use_) job.worker = reserved_type.empty() ? worker_for(job) : reserved_worker;
  starved_since_[job.type] = now;
  job.running = true;
  if (job.joinable) last_admitted_joinable_[{job.type, job.id}] = best;
  job.charge = job.cost ? *job.cost : UseEstimate(job, now);
  job.weight = settings_.count(job.key) ? settings_[job.key].weight : 1.0;
  keys_[job.key].acc = keys_[job.key].acc + job.charge / job.weight;
  if (const std::string group = GroupOf(job.key); !group.empty()) {
    groups_[group].acc = groups_[group].acc + job.charge / GroupWeight(group);
  }
  Take(options_.rule.rate_limit, global_rate_, now);
  Take(types_[job.type].rate_limit, type_rates_[job.type], now);
  if (RateOf(job.key).per_second > 0) {
    Bucket bucket = KeyBucket(job.key);
    Take(RateOf(job.key), bucket, now);
    key_rates_[job.key] = bucket;
  }
  const Admission admission{best, job.charge, job.worker, !reserved_type.empty(), borrowed};
  // A type whose queue still stands after the admission refuses its heaviest pending job.
  const std::string type = job.type;
  ObserveShedding(now);
  if (Stands(type, now)) {
    if (const std::optional<int> heaviest = Heaviest(type, nullptr)) Shed(*heaviest, now);
    ObserveShedding(now);
  }
  return admission;
}

Status ReferenceModel::Complete(int n, double elapsed, double now) {
  if (!std::isfinite(elapsed) || elapsed < 0) return absl::InvalidArgumentError("elapsed");
  auto it = jobs_.find(n);
  if (it == jobs_.end()) return absl::NotFoundError("job");
  if (!it->second.running) return absl::FailedPreconditionError("pending");
  const ModelJob job = it->second;
  double& est = UseEstimate(job, now);
  est = options_.rule.alpha * elapsed + (1.0 - options_.rule.alpha) * est;
  const std::string group = GroupOf(job.key);  // its key's group now
  if (options_.rule.reconcile) {
    keys_[job.key].acc = keys_[job.key].acc + (elapsed - job.charge) / job.weight;
    if (!group.empty()) {
      groups_[group].acc = groups_[group].acc + (elapsed - job.charge) / GroupWeight(group);
    }
  }
  jobs_.erase(it);
  MaybeIdle(job.key, now);
  return absl::OkStatus();
}

Status ReferenceModel::CompleteUnmeasured(int n, double now) {
  auto it = jobs_.find(n);
  if (it == jobs_.end()) return absl::NotFoundError("job");
  if (!it->second.running) return absl::FailedPreconditionError("pending");
  const std::string key = it->second.key;
  jobs_.erase(it);
  MaybeIdle(key, now);
  return absl::OkStatus();
}

Status ReferenceModel::CompleteUnused(int n, double now) {
  auto it = jobs_.find(n);
  if (it == jobs_.end()) return absl::NotFoundError("job");
  if (!it->second.running) return absl::FailedPreconditionError("pending");
  const ModelJob job = it->second;
  keys_[job.key].acc = keys_[job.key].acc - job.charge / job.weight;
  if (const std::string group = GroupOf(job.key); !group.empty()) {
    groups_[group].acc = groups_[group].acc - job.charge / GroupWeight(group);
  }
  jobs_.erase(it);
  MaybeIdle(job.key, now);
  return absl::OkStatus();
}

bool ReferenceModel::GroupBusy(const std::string& group) const {
  for (const auto& [n, job] : jobs_) {
    if (GroupOf(job.key) == group) return true;
  }
  return false;
}

void ReferenceModel::MaybeIdleGroup(const std::string& group, double now) {
  if (group.empty() || GroupBusy(group)) return;
  groups_[group].idle_since = now;
  groups_[group].idle_order = next_order_++;
}

std::string ReferenceModel::TrackGroupOf(const std::string& key) {
  const std::string group = GroupOf(key);
  if (!group.empty()) groups_[group];
  return group;
}

Status ReferenceModel::SetKeyGroup(const std::string& key, const std::string& group, double now) {
  if (!std::isfinite(now)) return absl::InvalidArgumentError("now");
  const std::string from = GroupOf(key);
  if (from == group) return absl::OkStatus();
  settings_[key].group = group;
  if (keys_.count(key) && KeyBusy(key)) {
    TrackGroupOf(key);
    MaybeIdleGroup(from, now);
  }
  return absl::OkStatus();
}

Status ReferenceModel::SetGroupWeight(const std::string& group, double weight) {
  if (!(std::isfinite(weight) && weight > 0) || group.empty()) {
    return absl::InvalidArgumentError("weight");
  }
  group_weights_[group] = weight;
  return absl::OkStatus();
}

std::optional<double> ReferenceModel::GroupAccumulatedCost(const std::string& group) const {
  auto it = groups_.find(group);
  if (it == groups_.end()) return std::nullopt;
  return it->second.acc;
}

void ReferenceModel::MaybeIdle(const std::string& key, double now) {
  MaybeIdleGroup(GroupOf(key), now);
  if (KeyBusy(key)) return;
  keys_[key].idle_since = now;
  keys_[key].idle_order = next_order_++;
}

std::pair<std::size_t, std::size_t> ReferenceModel::Sweep(double now) {
  std::vector<std::pair<std::uint64_t, std::string>> idle;
  for (const auto& [name, key] : keys_) {
    if (!KeyBusy(name)) idle.emplace_back(key.idle_order, name);
  }
  std::sort(idle.begin(), idle.end());
  std::size_t keys = 0;
  for (const auto& [order, name] : idle) {
    if (keys == options_.rule.sweep_batch ||
        keys_[name].idle_since + options_.rule.key_ttl.count() > now) {
      break;
    }
    keys_.erase(name);
    key_rates_.erase(name);
    ++keys;
  }
  std::vector<std::pair<std::uint64_t, std::string>> idle_groups;
  for (const auto& [name, group] : groups_) {
    if (!GroupBusy(name)) idle_groups.emplace_back(group.idle_order, name);
  }
  std::sort(idle_groups.begin(), idle_groups.end());
  groups_evicted_ = 0;
  for (const auto& [order, name] : idle_groups) {
    if (groups_evicted_ == options_.rule.sweep_batch ||
        groups_[name].idle_since + options_.rule.key_ttl.count() > now) {
      break;
    }
    groups_.erase(name);
    ++groups_evicted_;
  }
  std::vector<std::pair<std::uint64_t, std::pair<std::string, std::string>>> lru;
  for (const auto& [name, est] : estimates_) lru.emplace_back(est.use_order, name);
  std::sort(lru.begin(), lru.end());
  std::size_t estimates = 0;
  for (const auto& [order, name] : lru) {
    if (estimates == options_.rule.sweep_batch ||
        estimates_[name].last_used + options_.rule.estimate_ttl.count() > now) {
      break;
    }
    estimates_.erase(name);
    ++estimates;
  }
  return {keys, estimates};
}

std::optional<double> ReferenceModel::AccumulatedCost(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  return it->second.acc;
}

std::optional<double> ReferenceModel::Estimate(const std::string& type,
                                               const std::string& id) const {
  auto it = estimates_.find({type, id});
  if (it == estimates_.end()) return std::nullopt;
  return it->second.value;
}

const std::map<std::string, double> ReferenceModel::Keys() const {
  std::map<std::string, double> out;
  for (const auto& [name, key] : keys_) out[name] = key.acc;
  return out;
}

std::int64_t ReferenceModel::pending() const {
  std::int64_t n = 0;
  for (const auto& [i, job] : jobs_) n += !job.running;
  return n;
}

std::int64_t ReferenceModel::running() const {
  std::int64_t n = 0;
  for (const auto& [i, job] : jobs_) n += job.running;
  return n;
}

std::int64_t ReferenceModel::slots_in_use() const {
  std::int64_t n = 0;
  for (const auto& [i, job] : jobs_) n += job.running ? types_.at(job.type).slots : 0;
  return n;
}

}  // namespace fairgate::testing
