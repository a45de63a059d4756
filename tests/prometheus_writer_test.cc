// The exposition writer, byte for byte.
#include "metrics/prometheus_writer.h"

#include <cmath>
#include <limits>
#include <string>

#include "doctest/doctest.h"
#include "metrics/scheduler_metrics.h"

namespace fairgate::metrics {
namespace {
namespace prometheus_writer_test {

TEST_CASE("Metrics.Writer.FamiliesSamplesAndEscapes") {
  std::string out;
  PrometheusWriter w(out);
  w.Family("fairgate_jobs_total", "counter", "Jobs, with a \\ and a\nnewline.");
  w.Sample("fairgate_jobs_total", {{"type", "clone"}, {"tier", "8"}}, 3);
  w.Sample("fairgate_jobs_total", {{"type", "a \"quoted\" \\ name\n"}}, 0.25);
  w.Family("fairgate_capacity", "gauge", "Slots.");
  w.Sample("fairgate_capacity", {}, 8);
  CHECK(out ==
        "# HELP fairgate_jobs_total Jobs, with a \\\\ and a\\nnewline.\n"
        "# TYPE fairgate_jobs_total counter\n"
        "fairgate_jobs_total{type=\"clone\",tier=\"8\"} 3\n"
        "fairgate_jobs_total{type=\"a \\\"quoted\\\" \\\\ name\\n\"} 0.25\n"
        "# HELP fairgate_capacity Slots.\n"
        "# TYPE fairgate_capacity gauge\n"
        "fairgate_capacity 8\n");
}

TEST_CASE("Metrics.Writer.HistogramIsCumulativeWithInfSumAndCount") {
  std::string out;
  PrometheusWriter w(out);
  w.Histogram("fairgate_wait_seconds", {{"type", "fetch"}}, {0.5, 1, 10}, {1, 3, 3}, 7.75, 4);
  CHECK(out ==
        "fairgate_wait_seconds_bucket{type=\"fetch\",le=\"0.5\"} 1\n"
        "fairgate_wait_seconds_bucket{type=\"fetch\",le=\"1\"} 3\n"
        "fairgate_wait_seconds_bucket{type=\"fetch\",le=\"10\"} 3\n"
        "fairgate_wait_seconds_bucket{type=\"fetch\",le=\"+Inf\"} 4\n"
        "fairgate_wait_seconds_sum{type=\"fetch\"} 7.75\n"
        "fairgate_wait_seconds_count{type=\"fetch\"} 4\n");
}

TEST_CASE("Metrics.Writer.SpecialValues") {
  CHECK(PrometheusWriter::FormatValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(PrometheusWriter::FormatValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(PrometheusWriter::FormatValue(std::nan("")) == "NaN");
  CHECK(PrometheusWriter::FormatValue(1e20) == "1e+20");
  CHECK(PrometheusWriter::FormatValue(0.1) == "0.1");
  CHECK(PrometheusWriter::FormatValue(-3) == "-3");
}

// Completions are counted per status code, in code order, each code once a job has returned it;
// a code outside absl's canonical ones is "unknown", as absl::Status::code() reports it. A
// histogram counts a value in the first bucket whose bound is at or above it.
TEST_CASE("Metrics.SchedulerMetrics.CompletionsByCodeAndHistogramBuckets") {
  SchedulerMetrics metrics;
  metrics.AddType(0, "clone", 8);
  metrics.Completed(0, absl::StatusCode::kInternal, 0.001);
  metrics.Completed(0, absl::StatusCode::kOk, 0.002);
  metrics.Completed(0, absl::StatusCode::kOk, 700);
  metrics.Completed(0, absl::Status(static_cast<absl::StatusCode>(42), "odd").code(), 1);
  std::string out;
  metrics.Write(out, Snapshot{}, 0);
  const std::string family = "fairgate_jobs_completed_total";
  const auto ok = out.find(family + "{status=\"ok\",tier=\"8\",type=\"clone\"} 2\n");
  const auto unknown = out.find(family + "{status=\"unknown\",tier=\"8\",type=\"clone\"} 1\n");
  const auto internal = out.find(family + "{status=\"internal\",tier=\"8\",type=\"clone\"} 1\n");
  REQUIRE(ok != std::string::npos);
  REQUIRE(unknown != std::string::npos);
  REQUIRE(internal != std::string::npos);
  CHECK(ok < unknown);
  CHECK(unknown < internal);
  CHECK(out.find(family + "{status=\"cancelled\"") == std::string::npos);
  const auto& run = metrics.types()[0].run;
  CHECK(run.Cumulative() ==
        std::vector<std::uint64_t>{1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3});  // 700 s: above all
  CHECK(run.count() == 4);
  CHECK(out.find("fairgate_run_seconds_bucket{tier=\"8\",type=\"clone\",le=\"+Inf\"} 4\n") !=
        std::string::npos);
}

TEST_CASE("Metrics.SecondsHistogram.FirstBucketTakesUpToItsBoundAndNothingAbove") {
  SecondsHistogram wait;
  wait.Observe(0);  // admitted without waiting
  wait.Observe(SecondsHistogram::kBounds[0]);
  wait.Observe(0.0011);
  wait.Observe(0.005);
  wait.Observe(0.0051);
  CHECK(wait.Cumulative() == std::vector<std::uint64_t>{2, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5});
  CHECK(wait.count() == 5);
}

}  // namespace prometheus_writer_test
}  // namespace
}  // namespace fairgate::metrics
