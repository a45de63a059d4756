// core_instructions PENDING KEYS IDS ITERATIONS [KEY_RATE [GROUPS]]: BM_AdmitComplete's loop, a
// fixed number of times, with every key under a rate limit of KEY_RATE a second (burst 1) if given
// and not 0, and the keys spread over GROUPS groups (SetKeyGroup, key i in group i % GROUPS) if
// given
// (`core_instructions herd WAITERS KEYS ITERATIONS`: BM_ConflictHerd's),
// for counting instructions with `valgrind --tool=callgrind`, which gives the same count on every
// run of the same binary, however busy the machine (this VM's timings vary by 2x from one minute
// to the next). Instructions per admit+complete = (count at 2N - count at N) / N, which cancels
// the cost of building the backlog.
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>

#include "core_workload.h"

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "herd") {
    const int waiters = std::atoi(argv[2]), keys = std::atoi(argv[3]);
    const long iterations = std::atol(argv[4]);
    if (waiters < 1 || keys < 1 || iterations < 0) {
      std::fprintf(stderr, "core_instructions herd: every argument must be positive\n");
      return 2;
    }
    fairgate::bench::Herd herd(waiters, keys);
    for (long i = 0; i < iterations; ++i) herd.Step();
    std::printf("pending %lld\n", static_cast<long long>(herd.core().TakeSnapshot(0).pending));
    return 0;
  }
  if (argc < 5 || argc > 7) {
    std::fprintf(stderr,
                 "usage: core_instructions PENDING KEYS IDS ITERATIONS [KEY_RATE [GROUPS]]\n"
                 "       core_instructions herd WAITERS KEYS ITERATIONS\n");
    return 2;
  }
  const int pending = std::atoi(argv[1]), keys = std::atoi(argv[2]), ids = std::atoi(argv[3]);
  const long iterations = std::atol(argv[4]);
  if (pending < 1 || keys < 1 || ids < 1 || iterations < 0) {
    std::fprintf(stderr, "core_instructions: every argument must be positive\n");
    return 2;
  }
  const double key_rate = argc >= 6 ? std::atof(argv[5]) : 0;
  const int groups = argc == 7 ? std::atoi(argv[6]) : 0;
  if (!(key_rate >= 0) || groups < 0) {
    std::fprintf(stderr, "core_instructions: KEY_RATE and GROUPS must be >= 0\n");
    return 2;
  }
  fairgate::bench::Workload w(keys, ids);
  auto core = fairgate::bench::MakeCore(fairgate::bench::kCapacity, {key_rate, 1});
  for (int i = 0; groups > 0 && i < keys; ++i) {
    if (!core->SetKeyGroup(w.keys[i], "group-" + std::to_string(i % groups), 0).ok()) std::abort();
  }
  double now = 0;
  for (int i = 0; i < pending; ++i) fairgate::bench::Enqueue(*core, w, now);
  std::deque<fairgate::core::JobTicket> running;
  while (auto a = core->NextAdmission(now)) running.push_back(a->ticket);
  for (long i = 0; i < iterations; ++i) {
    now += 0.001;
    if (!running.empty()) {
      if (!core->Complete(running.front(), 1.0 + (w.rng() % 100) * 0.1, now).ok()) std::abort();
      running.pop_front();
    }
    fairgate::bench::Enqueue(*core, w, now);
    if (auto a = core->NextAdmission(now)) running.push_back(a->ticket);
  }
  std::printf("pending %lld\n", static_cast<long long>(core->TakeSnapshot(0).pending));
  return 0;
}
