// The exposition writer, byte for byte.
#include "metrics/prometheus_writer.h"

#include <cmath>
#include <limits>
#include <string>

#include "doctest/doctest.h"

namespace fairgate::metrics {
namespace {

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

}  // namespace
}  // namespace fairgate::metrics
