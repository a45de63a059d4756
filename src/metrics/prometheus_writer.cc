#include "metrics/prometheus_writer.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/arguments.h"

namespace fairgate::metrics {
namespace {

// HELP text escapes backslash and newline; label values also the double quote.
void AppendEscaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string PrometheusWriter::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<std::int64_t>(value));
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

void PrometheusWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  absl::StrAppend(&out_, "# HELP ", core::AsAbsl(name), " ");
  AppendEscaped(out_, help, /*quote=*/false);
  absl::StrAppend(&out_, "\n# TYPE ", core::AsAbsl(name), " ", core::AsAbsl(type), "\n");
}

void PrometheusWriter::WriteLabels(const Labels& labels, std::string_view extra_name,
                                   std::string_view extra_value) {
  if (labels.empty() && extra_name.empty()) return;
  out_ += '{';
  bool first = true;
  auto one = [&](std::string_view name, std::string_view value) {
    if (!first) out_ += ',';
    first = false;
    absl::StrAppend(&out_, core::AsAbsl(name), "=\"");
    AppendEscaped(out_, value, /*quote=*/true);
    out_ += '"';
  };
  for (const auto& [name, value] : labels) one(name, value);
  if (!extra_name.empty()) one(extra_name, extra_value);
  out_ += '}';
}

void PrometheusWriter::Sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  WriteLabels(labels);
  absl::StrAppend(&out_, " ", FormatValue(value), "\n");
}

void PrometheusWriter::Histogram(std::string_view name, const Labels& labels,
                                 absl::Span<const double> bounds,
                                 const std::vector<std::uint64_t>& cumulative, double sum,
                                 std::uint64_t count) {
  const std::string bucket = absl::StrCat(core::AsAbsl(name), "_bucket");
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    out_ += bucket;
    WriteLabels(labels, "le", FormatValue(bounds[i]));
    absl::StrAppend(&out_, " ", cumulative[i], "\n");
  }
  out_ += bucket;
  WriteLabels(labels, "le", "+Inf");
  absl::StrAppend(&out_, " ", count, "\n");
  Sample(absl::StrCat(core::AsAbsl(name), "_sum"), labels, sum);
  Sample(absl::StrCat(core::AsAbsl(name), "_count"), labels, static_cast<double>(count));
}

}  // namespace fairgate::metrics
