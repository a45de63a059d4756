// PrometheusWriter: writes metrics in the Prometheus text exposition format (version 0.0.4).
//
// Debian 12 has no Prometheus client library for C++, and fairgate needs only the writing side,
// so this is the small writer, by hand: families with their HELP and TYPE lines, samples with
// escaped label values, histograms as cumulative `_bucket{le=...}` samples with `_sum` and
// `_count`. Values print as integers when they are whole, "+Inf", "-Inf" and "NaN" otherwise as
// the format asks, else in the shortest form that reads back to the same double.
//
// The caller writes each family's samples right after its Family line, as the format requires.
// Not thread-safe: one writer per exposition.
#ifndef FAIRGATE_METRICS_PROMETHEUS_WRITER_H_
#define FAIRGATE_METRICS_PROMETHEUS_WRITER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace fairgate::metrics {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

class PrometheusWriter {
 public:
  explicit PrometheusWriter(std::string& out) : out_(out) {}

  // `type` is "counter", "gauge" or "histogram".
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const Labels& labels, double value);
  // Cumulative counts per upper bound (`bounds` ascending, without +Inf), the sum and the count.
  void Histogram(std::string_view name, const Labels& labels, absl::Span<const double> bounds,
                 const std::vector<std::uint64_t>& cumulative, double sum, std::uint64_t count);

  static std::string FormatValue(double value);

 private:
  void WriteLabels(const Labels& labels, std::string_view extra_name = {},
                   std::string_view extra_value = {});
  std::string& out_;
};

}  // namespace fairgate::metrics

#endif  // FAIRGATE_METRICS_PROMETHEUS_WRITER_H_
