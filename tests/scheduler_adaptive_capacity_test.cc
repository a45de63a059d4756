// Adaptive capacity through the Scheduler (fairgate/adaptive_capacity.h): the rule itself, the
// cap following an injected stall counter, what a lowered cap admits, and the refusals. The
// counter is injected, so nothing depends on this machine's load; waits are for conditions,
// with generous bounds, and no test asserts how long anything took.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime/kernel_pressure.h"
#include "runtime_test_util.h"
#include "temp_dir.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_adaptive_capacity_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::Watchdog;

TEST_CASE("AdaptiveCapacity.Rule.ShrinksMultiplicativelyGrowsByOneAndStaysInItsBounds") {
  AdaptiveCapacity rule;  // min 1, high 0.2, low 0.05, decrease 0.75
  rule.min = 2;
  CHECK(NextCapacity(rule, 8, 8, 0.5, true) == 6);    // floor(8 * 0.75)
  CHECK(NextCapacity(rule, 3, 8, 0.5, true) == 2);    // floor(2.25), and at least one less
  CHECK(NextCapacity(rule, 2, 8, 1.0, true) == 2);    // never below min
  CHECK(NextCapacity(rule, 6, 8, 0.01, true) == 7);   // room and work waiting: one more
  CHECK(NextCapacity(rule, 6, 8, 0.01, false) == 6);  // nothing waits: no reason to grow
  CHECK(NextCapacity(rule, 8, 8, 0.0, true) == 8);    // never above max_concurrency
  CHECK(NextCapacity(rule, 5, 8, 0.1, true) == 5);    // between low and high: it stays
  rule.decrease = 0.99;
  CHECK(NextCapacity(rule, 5, 8, 0.5, true) == 4);  // a shrink takes at least one slot
}

TEST_CASE("AdaptiveCapacity.Rule.TheWorstSignalDecides") {
  AdaptiveCapacity rule;  // CPU: high 0.2, low 0.05
  rule.signals = {{.source = PressureSource::kMemorySome, .high = 0.3, .low = 0.1},
                  {.source = PressureSource::kMemoryUse, .high = 0.9, .low = 0.8}};
  using Readings = std::vector<std::optional<double>>;
  // Every signal below its low, work waiting: one more slot.
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{0.05, 0.5}, true) == 5);
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{0.05, 0.5}, false) == 4);
  // One above its high shrinks, whatever the others (CPU calm): memory stalls, or memory use.
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{0.35, 0.5}, true) == 3);
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{0.05, 0.95}, true) == 3);
  // Its own thresholds, not CPU's: 0.25 is above CPU's high but below memory's.
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{0.25, 0.5}, true) == 4);
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.25, Readings{0.05, 0.5}, true) == 3);  // CPU's
  // One between its thresholds holds the cap; one that could not be read blocks growth only.
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{0.05, 0.85}, true) == 4);
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{std::nullopt, 0.5}, true) == 4);
  CHECK(NextCapacityOfAll(rule, 4, 8, 0.0, Readings{std::nullopt, 0.95}, true) == 3);
  // With no signals it is NextCapacity.
  AdaptiveCapacity cpu_only;
  for (const double pressure : {0.0, 0.1, 0.5}) {
    for (const bool waiting : {false, true}) {
      CHECK(NextCapacityOfAll(cpu_only, 4, 8, pressure, {}, waiting) ==
            NextCapacity(cpu_only, 4, 8, pressure, waiting));
    }
  }
  CHECK(DefaultPressureSignals().size() == 2);
  CHECK(DefaultPressureSignals()[0].source == PressureSource::kMemorySome);
  CHECK(DefaultPressureSignals()[1].source == PressureSource::kIoSome);
}

TEST_CASE("AdaptiveCapacity.Options.BadRulesAreRefusedNamingTheField") {
  auto refusal = [](AdaptiveCapacity rule) {
    SchedulerOptions options = SchedulerOptions::Default();
    options.rule.max_concurrency = 4;
    rule.stalled_seconds = [] { return StatusOr<double>(0.0); };
    options.rule.adaptive_capacity = rule;
    auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
    CHECK(created.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(created.status().message());
  };
  CHECK(refusal({.min = 0}) ==
        "rule.adaptive_capacity.min must be in [1, max_concurrency 4], got 0");
  CHECK(refusal({.min = 5}) ==
        "rule.adaptive_capacity.min must be in [1, max_concurrency 4], got 5");
  CHECK(refusal({.interval = Seconds(0)}) ==
        "rule.adaptive_capacity.interval must be finite and > 0, got 0");
  CHECK(refusal({.high = 1.5}) == "rule.adaptive_capacity.high must be in (0, 1], got 1.5");
  CHECK(refusal({.high = 0.2, .low = 0.2}) ==
        "rule.adaptive_capacity.low must be in [0, high 0.2), got 0.2");
  CHECK(refusal({.decrease = 1}) == "rule.adaptive_capacity.decrease must be in (0, 1), got 1");
  auto with_signals = [](std::vector<PressureSignal> signals) {
    AdaptiveCapacity rule;
    for (PressureSignal& signal : signals) signal.read = [] { return StatusOr<double>(0.0); };
    rule.signals = std::move(signals);
    return rule;
  };
  CHECK(refusal(with_signals({{.source = PressureSource::kIoFull, .high = 0}})) ==
        "rule.adaptive_capacity.signals[0] (io full).high must be in (0, 1], got 0");
  CHECK(
      refusal(with_signals({{.source = PressureSource::kMemoryUse}, {.high = 0.5, .low = 0.5}})) ==
      "rule.adaptive_capacity.signals[1] (memory some).low must be in [0, high 0.5), got 0.5");
  CHECK(refusal(with_signals(
            {{.source = PressureSource::kIoSome}, {.source = PressureSource::kIoSome}})) ==
        "rule.adaptive_capacity.signals[1] (io some): a second signal of that source");
  CHECK(refusal(with_signals({{.source = static_cast<PressureSource>(9)}})) ==
        "rule.adaptive_capacity.signals[0] (unknown): not a pressure source");
}

// Writes `text` to `path`, making its directories: a kernel file as a test's cgroup has it.
void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// The kernel's files, as this machine has them and as a cgroup v2 of the process's own would:
// made in a temporary directory, since CI may or may not run in one.
TEST_CASE("AdaptiveCapacity.Signal.ACgroupOfItsOwnIsReadBeforeTheMachine") {
  testing::TempDir dir;
  const std::filesystem::path root = dir.path();
  const std::string psi =
      "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\n"
      "full avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n";
  WriteFile(root / "v2/system.slice/mirror.service/cgroup.controllers", "cpu io memory\n");
  for (const char* file : {"cpu.pressure", "memory.pressure", "io.pressure"}) {
    WriteFile(root / "v2/system.slice/mirror.service" / file, psi);
  }
  WriteFile(root / "v2/system.slice/mirror.service/memory.current", "536870912\n");
  WriteFile(root / "v2/system.slice/mirror.service/memory.max", "1073741824\n");
  WriteFile(root / "self_cgroup", "12:memory:/x\n0::/system.slice/mirror.service\n");
  const std::vector<std::string> roots = {(root / "none").string(), (root / "v2").string()};
  const std::optional<std::string> cgroup =
      internal::OwnCgroupV2((root / "self_cgroup").string(), roots);
  REQUIRE(cgroup.has_value());
  CHECK(*cgroup == (root / "v2/system.slice/mirror.service").string());
  // The root cgroup, cgroup v1 only, a path no root has: none of its own.
  WriteFile(root / "in_root", "0::/\n");
  WriteFile(root / "v1_only", "4:memory:/process_api/x\n");
  WriteFile(root / "elsewhere", "0::/other.slice\n");
  for (const char* file : {"in_root", "v1_only", "elsewhere", "missing"}) {
    CAPTURE(file);
    CHECK_FALSE(internal::OwnCgroupV2((root / file).string(), roots).has_value());
  }
  CHECK(*internal::ReadStallSeconds(*cgroup + "/io.pressure", "some") == 2.5);
  CHECK(*internal::ReadStallSeconds(*cgroup + "/io.pressure", "full") == 1.0);
  CHECK(*internal::ReadMemoryUse(*cgroup) == 0.5);
  // Each source reads its own file and line of the cgroup.
  auto full = internal::KernelSignal(PressureSource::kMemoryFull, cgroup);
  REQUIRE(full.ok());
  CHECK(*(*full)() == 1.0);
  auto use = internal::KernelSignal(PressureSource::kMemoryUse, cgroup);
  REQUIRE(use.ok());
  CHECK(*(*use)() == 0.5);
  // A cgroup whose pressure file cannot be read: the machine's is.
  std::filesystem::remove(*cgroup + "/io.pressure");
  const double machine_before = *internal::ReadStallSeconds("/proc/pressure/io", "some");
  auto fallback = internal::KernelSignal(PressureSource::kIoSome, cgroup);
  REQUIRE_MESSAGE(fallback.ok(), fallback.status().message());
  CHECK(*(*fallback)() >= machine_before);  // the machine's counter, which only grows
  // No limit, or no cgroup: memory use cannot be read, and says why.
  WriteFile(root / "v2/system.slice/mirror.service/memory.max", "max\n");
  CHECK(internal::ReadMemoryUse(*cgroup).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(internal::KernelSignal(PressureSource::kMemoryUse, cgroup).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  const Status no_cgroup =
      internal::KernelSignal(PressureSource::kMemoryUse, std::nullopt).status();
  CHECK(no_cgroup.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(no_cgroup.message()).find("cgroup (v2") != std::string::npos);
  // A file without the line asked for.
  WriteFile(root / "some_only", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n");
  CHECK(internal::ReadStallSeconds((root / "some_only").string(), "full").status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Without a cgroup, the machine's files (this machine's kernel has memory and io PSI).
  auto machine = internal::KernelSignal(PressureSource::kIoSome, std::nullopt);
  REQUIRE_MESSAGE(machine.ok(), machine.status().message());
  CHECK(*(*machine)() >= 0);
}

// Memory in use is what a cgroup holds less the page cache the kernel reclaims first, over its
// limit: from the cgroup v2's files where it has a limit, else (memory still on cgroup v1, as on
// a hybrid hierarchy) from the v1 memory controller's, whose limit may be a parent's.
TEST_CASE("AdaptiveCapacity.Signal.MemoryUseLeavesOutReclaimableCacheOnCgroupV2AndV1") {
  testing::TempDir dir;
  const std::filesystem::path root = dir.path();
  const std::filesystem::path v2 = root / "v2/mirror.service";
  WriteFile(v2 / "cgroup.controllers", "cpu io memory\n");
  WriteFile(v2 / "memory.current", "800\n");
  WriteFile(v2 / "memory.max", "1000\n");
  CHECK(*internal::ReadMemoryUse(v2.string()) == 0.8);  // no memory.stat: all of it
  WriteFile(v2 / "memory.stat", "anon 300\nfile 500\ninactive_file 400\nactive_file 100\n");
  CHECK(*internal::ReadMemoryUse(v2.string()) == 0.4);
  // A hybrid hierarchy: the process's v2 cgroup has no memory controller, its v1 one has.
  WriteFile(root / "self_cgroup", "4:memory:/mirror\n3:cpu,cpuacct:/\n0::/mirror.service\n");
  const std::filesystem::path v1 = root / "memory/mirror";
  WriteFile(v1 / "memory.usage_in_bytes", "600\n");
  WriteFile(v1 / "memory.limit_in_bytes", "9223372036854771712\n");  // none of its own
  WriteFile(
      v1 / "memory.stat",
      "cache 500\ninactive_file 9\nhierarchical_memory_limit 2000\ntotal_inactive_file 200\n");
  const std::optional<std::string> memory_v1 =
      internal::OwnMemoryCgroupV1((root / "self_cgroup").string(), (root / "memory").string());
  REQUIRE(memory_v1.has_value());
  CHECK(*memory_v1 == v1.string());
  CHECK(*internal::ReadMemoryUseV1(*memory_v1) == 0.2);  // (600 - 200) / the parent's 2000
  WriteFile(v1 / "memory.limit_in_bytes", "1000\n");
  CHECK(*internal::ReadMemoryUseV1(*memory_v1) == 0.4);  // its own, the lesser
  WriteFile(root / "no_memory", "3:cpu,cpuacct:/\n0::/mirror.service\n");
  WriteFile(root / "joined", "5:cpu,memory:/mirror\n");
  CHECK_FALSE(internal::OwnMemoryCgroupV1((root / "no_memory").string(), (root / "memory").string())
                  .has_value());
  CHECK(internal::OwnMemoryCgroupV1((root / "joined").string(), (root / "memory").string()) ==
        v1.string());
  // The v2 cgroup's limit first; without one there, the v1 controller's.
  auto both = internal::KernelSignal(PressureSource::kMemoryUse, v2.string(), memory_v1);
  REQUIRE(both.ok());
  CHECK(*(*both)() == 0.4);
  WriteFile(v2 / "memory.current", "900\n");
  CHECK(*(*both)() == 0.5);  // read again at each call
  WriteFile(v2 / "memory.max", "max\n");
  auto v1_only = internal::KernelSignal(PressureSource::kMemoryUse, v2.string(), memory_v1);
  REQUIRE(v1_only.ok());
  CHECK(*(*v1_only)() == 0.4);
  // No limit anywhere: refused, naming the file.
  WriteFile(v1 / "memory.limit_in_bytes", "9223372036854771712\n");
  WriteFile(v1 / "memory.stat", "hierarchical_memory_limit 9223372036854771712\n");
  const Status none =
      internal::KernelSignal(PressureSource::kMemoryUse, v2.string(), memory_v1).status();
  CHECK(none.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(none.message()).find("memory.limit_in_bytes") != std::string::npos);
  const Status neither =
      internal::KernelSignal(PressureSource::kMemoryUse, std::nullopt, std::nullopt).status();
  CHECK(neither.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(neither.message()).find("cgroup") != std::string::npos);
}

// Scheduler::Create reads a kernel signal once: one that cannot be read is refused, naming it.
TEST_CASE("AdaptiveCapacity.Options.AKernelSignalThatCannotBeReadIsRefusedAtCreate") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 4;
  AdaptiveCapacity rule;
  rule.stalled_seconds = [] { return StatusOr<double>(0.0); };
  rule.signals = {{.source = PressureSource::kIoSome, .read = [] { return StatusOr<double>(0.0); }},
                  {.source = PressureSource::kMemoryUse}};
  options.rule.adaptive_capacity = rule;
  const StatusOr<std::function<StatusOr<double>()>> kernel = internal::KernelSignal(
      PressureSource::kMemoryUse, internal::OwnCgroupV2(), internal::OwnMemoryCgroupV1());
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  if (kernel.ok()) {
    CHECK(created.ok());  // a cgroup of its own with a memory limit: read from it
  } else {
    REQUIRE_FALSE(created.ok());
    CHECK(created.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(std::string(created.status().message()) ==
          "adaptive_capacity needs signals[1]: " + std::string(kernel.status().message()));
  }
}

TEST_CASE("AdaptiveCapacity.Signal.TheKernelCounterIsReadAndAMissingOneIsAClearError") {
  const StatusOr<double> missing = internal::ReadCpuStallSeconds("/nonexistent/pressure/cpu");
  CHECK(missing.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(missing.status().message()).find("/nonexistent/pressure/cpu") !=
        std::string::npos);
  // This machine's kernel has PSI (the Debian 12 kernels do): a counter that does not go back.
  const StatusOr<double> first = internal::ReadCpuStallSeconds();
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  const StatusOr<double> second = internal::ReadCpuStallSeconds();
  REQUIRE(second.ok());
  CHECK(*second >= *first);
}

// A stall counter the test drives: while `stalling`, it grows by a second per reading (pressure
// 1 over any interval shorter than that), else it stands still (pressure 0).
struct FakeStall {
  std::atomic<bool> stalling = false;
  std::atomic<bool> failing = false;
  std::atomic<double> total = 0;
  std::function<StatusOr<double>()> Source() {
    return [this]() -> StatusOr<double> {
      if (failing) return absl::UnavailableError("no signal");
      if (stalling) total = total + 1.0;
      return total.load();
    };
  }
};

// Submits one "build" job per promise of `done`, each holding its slot until `release` opens and
// then setting its promise to its status.
void SubmitHeld(Scheduler& scheduler, Gate& release, std::vector<std::promise<Status>>& done) {
  for (auto& d : done) {
    REQUIRE(scheduler
                .Submit(
                    {TypeName("build"), JobId("x"), FairnessKey("k")},
                    [&](const Context&) {
                      return release.Wait() ? absl::OkStatus() : absl::InternalError("gate");
                    },
                    [&d](const Status& s) { d.set_value(testing::Own(s)); })
                .ok());
  }
}

// A level the test sets (memory use), or fails; it counts its readings (one per interval).
struct FakeLevel {
  std::atomic<double> level = 0;
  std::atomic<bool> failing = false;
  std::atomic<int> reads = 0;
  std::function<StatusOr<double>()> Source() {
    return [this]() -> StatusOr<double> {
      ++reads;
      if (failing) return absl::UnavailableError("no signal");
      return level.load();
    };
  }
  // Until the rule has been applied `n` more times.
  bool WaitIntervals(int n) {
    const int target = reads + n;
    return Eventually([&] { return reads >= target; });
  }
};

TEST_CASE("AdaptiveCapacity.Scheduler.MemoryAndIoPressureLowerTheCapWhileTheCpuIsCalm") {
  Watchdog watchdog("adaptive capacity's signals", 60s);
  FakeStall cpu, io;
  FakeLevel memory;
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 4;
  options.rule.adaptive_capacity = AdaptiveCapacity{
      .min = 1,
      .interval = Seconds(0.01),
      .stalled_seconds = cpu.Source(),
      .signals = {
          {.source = PressureSource::kMemoryUse, .high = 0.9, .low = 0.8, .read = memory.Source()},
          {.source = PressureSource::kIoFull, .read = io.Source()}}};
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(created.ok(), created.status().message());
  std::unique_ptr<Scheduler> scheduler = *std::move(created);
  REQUIRE(scheduler->RegisterType("build", testing::Type(4, 4)).ok());
  // Six jobs that hold their slots: four run, two wait (so the cap has a reason to grow).
  Gate release;
  std::vector<std::promise<Status>> done(6);
  SubmitHeld(*scheduler, release, done);
  // However the test ends, the jobs end before the promises they set go.
  absl::Cleanup finish = [&] {
    release.Open();
    (void)scheduler->Drain(Context::Background());
  };
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 4; }));
  auto capacity = [&] { return scheduler->Snapshot().capacity; };
  // Memory use above its high: the cap falls to its minimum, the CPU calm.
  memory.level = 0.95;
  REQUIRE(Eventually([&] { return capacity() == 1; }));
  // Between its thresholds: the cap holds, although work waits.
  memory.level = 0.85;
  REQUIRE(memory.WaitIntervals(3));
  CHECK(capacity() == 1);
  // Memory use that cannot be read: counted, and the cap does not grow.
  auto errors = [&] {
    std::string metrics;
    scheduler->WriteMetrics(metrics);
    const std::string name = "\nfairgate_capacity_signal_errors_total ";
    const std::size_t at = metrics.find(name);
    return at == std::string::npos ? -1 : std::atoi(metrics.c_str() + at + name.size());
  };
  const int errors_before = errors();
  memory.level = 0.0;
  memory.failing = true;
  REQUIRE(Eventually([&] { return errors() >= errors_before + 3; }));  // the metrics lag
  CHECK(capacity() == 1);
  // Every signal calm: the cap grows back while work waits.
  memory.failing = false;
  REQUIRE(Eventually([&] { return capacity() == 4; }));
  // io stalls: down again, memory and CPU calm; then calm, up again.
  io.stalling = true;
  REQUIRE(Eventually([&] { return capacity() == 1; }));
  io.stalling = false;
  REQUIRE(Eventually([&] { return capacity() == 4; }));
  release.Open();
  for (auto& d : done) CHECK(d.get_future().get().ok());
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("AdaptiveCapacity.Scheduler.TheCapFollowsPressureAndALowerCapAdmitsLess") {
  Watchdog watchdog("adaptive capacity", 60s);
  FakeStall stall;
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 4;
  options.rule.adaptive_capacity =
      AdaptiveCapacity{.min = 1, .interval = Seconds(0.01), .stalled_seconds = stall.Source()};
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(created.ok());
  std::unique_ptr<Scheduler> scheduler = *std::move(created);
  REQUIRE(scheduler->RegisterType("build", testing::Type(4, 4)).ok());
  CHECK(scheduler->Snapshot().capacity == 4);  // it starts where a fixed cap would be

  // Under pressure the cap falls to its minimum: 4 -> 3 -> 2 -> 1.
  stall.stalling = true;
  REQUIRE(Eventually([&] { return scheduler->Snapshot().capacity == 1; }));
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_capacity 1\n") != std::string::npos);
  CHECK(metrics.find("fairgate_capacity_max 4\n") != std::string::npos);

  // Three jobs that hold their slots: one runs, two wait.
  Gate release;
  std::vector<std::promise<Status>> done(3);
  SubmitHeld(*scheduler, release, done);
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  CHECK(scheduler->Snapshot().pending == 2);

  // A signal that cannot be read leaves the cap where it is, counted.
  stall.failing = true;
  REQUIRE(Eventually([&] {
    std::string m;
    scheduler->WriteMetrics(m);
    return m.find("fairgate_capacity_signal_errors_total 0\n") == std::string::npos;
  }));
  CHECK(scheduler->Snapshot().capacity == 1);
  stall.failing = false;

  // The pressure is gone and work waits: the cap grows one slot per interval and admits it.
  stall.stalling = false;
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 3; }));
  CHECK(scheduler->Snapshot().capacity >= 3);
  release.Open();
  for (auto& d : done) CHECK(d.get_future().get().ok());
  // Nothing waits any more: the cap grows no further than that need, up to max_concurrency.
  CHECK(scheduler->Snapshot().capacity <= 4);
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

}  // namespace scheduler_adaptive_capacity_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();
