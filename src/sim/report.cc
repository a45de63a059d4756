#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fairgate::sim {
namespace {

// Nearest-rank percentile of an ascending, non-empty vector.
double Percentile(const std::vector<double>& sorted, double p) {
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t index = static_cast<std::size_t>(std::max(1.0, rank)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

std::string Escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A colour per key: a fixed palette, then evenly spread hues.
std::string ColourOf(std::size_t index) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                   "#edc948", "#ff9da7", "#9c755f", "#bab0ac", "#e15759"};
  constexpr std::size_t kSize = sizeof kPalette / sizeof kPalette[0];
  if (index < kSize) return kPalette[index];
  return absl::StrFormat("hsl(%d,55%%,55%%)", static_cast<int>((index * 137) % 360));
}

std::string KeyLabel(const std::string& key) { return key.empty() ? "\"\"" : key; }

// The step between a chart's ticks from 0 to `max` (> 0): the smallest of 1, 2 and 5 times a
// power of ten that makes at most ten steps, so that every tick is a round number.
double TickStep(double max) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(max / 10)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (max / (m * magnitude) <= 10) return m * magnitude;
  }
  return 10 * magnitude;
}

// The horizontal axis of a chart at height `y`, from 0 to `max` over `width` pixels after
// `left`, with a tick at every multiple of TickStep(max) and a caption on the right; it closes
// the chart's <svg>.
void AppendAxis(std::string& html, int y, int left, int width, double max,
                const std::string& caption) {
  absl::StrAppend(&html, "<line x1=\"", left, "\" y1=\"", y, "\" x2=\"", left + width, "\" y2=\"",
                  y, "\" stroke=\"#444\"/>\n");
  const double step = TickStep(max);
  for (int i = 0; i * step <= max * (1 + 1e-9); ++i) {
    const double value = i * step;
    absl::StrAppend(&html, absl::StrFormat("<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
                                           "text-anchor=\"middle\">%.6g</text>\n",
                                           left + width * value / max, y + 16, value));
  }
  absl::StrAppend(&html, "<text x=\"", left + width, "\" y=\"", y + 32,
                  "\" font-size=\"11\" text-anchor=\"end\">", caption, "</text>\n</svg>\n");
}

}  // namespace

ReportSummary Summarize(const Trace& trace, const SimResult& result) {
  ReportSummary summary;
  std::map<std::string, std::size_t> index;
  std::vector<double> slowdown_sum;
  std::vector<std::size_t> slowdown_n;
  double first_arrival = result.jobs.empty() ? 0 : result.jobs[0].arrival, last_done = 0;
  double busy = 0;
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const TraceJob& job = result.jobs[i];
    first_arrival = std::min(first_arrival, job.arrival);
    auto [it, inserted] = index.try_emplace(job.key, summary.keys.size());
    if (inserted) {
      KeyReport fresh;
      fresh.key = job.key;
      summary.keys.push_back(std::move(fresh));
      slowdown_sum.push_back(0);
      slowdown_n.push_back(0);
    }
    KeyReport& k = summary.keys[it->second];
    ++k.jobs;
    const JobOutcome& o = result.outcomes[i];
    if (!o.admitted_at) continue;
    ++k.admitted;
    const double wait = *o.admitted_at - job.arrival;
    k.waits.push_back(wait);
    if (job.duration > 0) {
      slowdown_sum[it->second] += (wait + job.duration) / job.duration;
      ++slowdown_n[it->second];
    }
    if (o.done_at) {
      busy += *o.done_at - *o.admitted_at;
      last_done = std::max(last_done, *o.done_at);
    }
  }
  double sum = 0, sum_squares = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < summary.keys.size(); ++i) {
    KeyReport& k = summary.keys[i];
    std::sort(k.waits.begin(), k.waits.end());
    if (!k.waits.empty()) {
      double total = 0;
      for (double w : k.waits) total += w;
      k.mean_wait = total / static_cast<double>(k.waits.size());
      k.p50_wait = Percentile(k.waits, 50);
      k.p99_wait = Percentile(k.waits, 99);
      k.worst_wait = k.waits.back();
    }
    if (slowdown_n[i] > 0) {
      k.mean_slowdown = slowdown_sum[i] / static_cast<double>(slowdown_n[i]);
      sum += k.mean_slowdown;
      sum_squares += k.mean_slowdown * k.mean_slowdown;
      ++n;
    }
  }
  summary.jain_index =
      n > 0 && sum_squares > 0 ? sum * sum / (static_cast<double>(n) * sum_squares) : 1;
  summary.span = std::max(0.0, last_done - first_arrival);
  summary.utilization =
      summary.span > 0 ? busy / (trace.options.rule.max_concurrency * summary.span) : 0;
  return summary;
}

namespace {

// The timeline's rows and bars: each admitted job takes the lowest free row (of its worker's,
// with workers), and gives it back when it completes or is lost with its worker.
struct Timeline {
  struct Bar {
    double start, end;
    int row;
    std::size_t job;
    bool conflict, aged, lost;
  };
  std::vector<std::string> row_labels;
  std::vector<Bar> bars;
  double end_time = 0;
};

// The timeline's rows: the scheduler's slots, or each worker's (a name that comes back keeps its
// rows: the most slots it had), with each worker's (first row, rows) in `rows_of_worker`.
std::vector<std::string> TimelineRows(const Trace& trace,
                                      std::map<std::string, std::pair<int, int>>& rows_of_worker) {
  std::vector<std::string> labels;
  if (trace.workers.empty()) {
    for (int r = 0; r < trace.options.rule.max_concurrency; ++r) {
      labels.push_back(absl::StrCat("slot ", r + 1));
    }
    return labels;
  }
  std::map<std::string, int> slots;
  for (const TraceWorker& w : trace.workers) {
    slots[w.name] = std::max(slots[w.name], w.config.slots);
  }
  for (const TraceWorker& w : trace.workers) {
    if (rows_of_worker.count(w.name) > 0) continue;
    rows_of_worker[w.name] = {static_cast<int>(labels.size()), slots[w.name]};
    for (int r = 0; r < slots[w.name]; ++r) labels.push_back(absl::StrCat(w.name, " ", r + 1));
  }
  return labels;
}

Timeline LayOutTimeline(const Trace& trace, const SimResult& result) {
  std::map<std::string, int> priority_of;
  for (const auto& [name, config] : trace.types) priority_of[name] = config.priority;
  std::map<std::string, std::pair<int, int>> rows_of_worker;
  Timeline timeline;
  timeline.row_labels = TimelineRows(trace, rows_of_worker);
  std::vector<Timeline::Bar>& bars = timeline.bars;
  std::vector<bool> busy(timeline.row_labels.size(), false);
  std::map<std::size_t, std::size_t> bar_of_job;
  for (const SimEvent& e : result.events) {
    timeline.end_time = std::max(timeline.end_time, e.t);
    if (e.kind == SimEvent::Kind::kAdmit) {
      auto first = busy.begin(), last = busy.end();
      if (auto it = rows_of_worker.find(e.worker); it != rows_of_worker.end()) {
        first = busy.begin() + it->second.first;
        last = first + it->second.second;
      }
      auto free = std::find(first, last, false);
      if (free == last) free = std::find(busy.begin(), busy.end(), false);  // never: a guard
      if (free == busy.end()) continue;
      const auto row = static_cast<int>(free - busy.begin());
      busy[static_cast<std::size_t>(row)] = true;
      bar_of_job[e.job] = bars.size();
      bars.push_back({e.t, e.t, row, e.job, e.waited_on_conflict,
                      e.effective_priority != priority_of[result.jobs[e.job].type], false});
    } else if ((e.kind == SimEvent::Kind::kDone || e.kind == SimEvent::Kind::kLost) &&
               bar_of_job.count(e.job) > 0) {
      Timeline::Bar& bar = bars[bar_of_job[e.job]];
      bar.end = e.t;
      bar.lost = e.kind == SimEvent::Kind::kLost;
      busy[static_cast<std::size_t>(bar.row)] = false;
    }
  }
  for (Timeline::Bar& bar : bars) {
    if (!result.outcomes[bar.job].done_at && !bar.lost) bar.end = timeline.end_time;  // `until`
  }
  return timeline;
}

// Where the report's plots are drawn, in pixels.
struct PlotArea {
  static constexpr int kWidth = 960, kRow = 22, kTop = 10;
  int left = 70;  // room for the longest row label (about 6.5 px a character at 11 px)
  int plot = 0;   // the plot's width
};

// The page's head, its summary line and the table of keys.
void AppendSummary(std::string& html, const std::string& title, const Trace& trace,
                   const SimResult& result, const ReportSummary& summary) {
  absl::StrAppend(
      &html, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>", Escape(title),
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse}td,th{padding:3px 10px;text-align:right;"
      "border-bottom:1px solid #ddd}th{background:#f3f3f3}td:first-child,th:first-child"
      "{text-align:left}.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;"
      "vertical-align:middle}</style></head><body>\n<h1>",
      Escape(title), "</h1>\n<p>", result.jobs.size(), " jobs, capacity ",
      trace.options.rule.max_concurrency, ", ", Escape(trace.mode), " mode",
      trace.options.rule.aging ? ", aging" : "", ". Utilization <b>",
      absl::StrFormat("%.1f%%", 100 * summary.utilization),
      "</b>, Jain's fairness index of the "
      "keys' mean slowdowns <b>",
      absl::StrFormat("%.3f", summary.jain_index), "</b>.</p>\n");
  absl::StrAppend(&html,
                  "<table><tr><th>key</th><th>jobs</th><th>admitted</th><th>mean wait</th>"
                  "<th>p50</th><th>p99</th><th>worst</th><th>mean slowdown</th></tr>\n");
  for (std::size_t i = 0; i < summary.keys.size(); ++i) {
    const KeyReport& k = summary.keys[i];
    absl::StrAppend(
        &html, "<tr><td><span class=\"swatch\" style=\"background:", ColourOf(i), "\"></span>",
        Escape(KeyLabel(k.key)), "</td><td>", k.jobs, "</td><td>", k.admitted, "</td>",
        absl::StrFormat("<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
                        "<td>%.2f</td></tr>\n",
                        k.mean_wait, k.p50_wait, k.p99_wait, k.worst_wait, k.mean_slowdown));
  }
  absl::StrAppend(&html, "</table>\n");
}

// The timeline: a row per slot (or worker slot), a bar per run, coloured by key.
void AppendTimeline(std::string& html, const Trace& trace, const SimResult& result,
                    const ReportSummary& summary, const Timeline& timeline, const PlotArea& area) {
  std::map<std::string, std::size_t> key_index;
  for (std::size_t i = 0; i < summary.keys.size(); ++i) key_index[summary.keys[i].key] = i;
  const double span = std::max(timeline.end_time, 1e-9);
  auto x = [&](double t) { return area.left + area.plot * t / span; };
  constexpr int kRow = PlotArea::kRow, kTop = PlotArea::kTop;
  const int rows = static_cast<int>(timeline.row_labels.size());
  absl::StrAppend(&html, "<h2>", trace.workers.empty() ? "Slots over time" : "Workers over time",
                  "</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", PlotArea::kWidth,
                  "\" height=\"", kTop + rows * kRow + 40, "\">\n");
  for (int r = 0; r < rows; ++r) {
    absl::StrAppend(&html, "<text x=\"", area.left - 8, "\" y=\"", kTop + r * kRow + 15,
                    "\" font-size=\"11\" text-anchor=\"end\">",
                    Escape(timeline.row_labels[static_cast<std::size_t>(r)]), "</text>\n");
  }
  for (const Timeline::Bar& bar : timeline.bars) {
    const std::size_t key = key_index[result.jobs[bar.job].key];
    const double width = std::max(1.0, x(bar.end) - x(bar.start));
    absl::StrAppend(
        &html,
        absl::StrFormat("<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"",
                        x(bar.start), kTop + bar.row * kRow + 2, width, kRow - 4, ColourOf(key)));
    if (bar.lost) {  // ended with its worker
      absl::StrAppend(&html, " stroke=\"#000\" stroke-width=\"2\" stroke-dasharray=\"1 2\"");
    } else if (bar.conflict) {
      absl::StrAppend(&html, " stroke=\"#d62728\" stroke-width=\"2\"");
    } else if (bar.aged) {
      absl::StrAppend(&html, " stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"");
    } else {
      absl::StrAppend(&html, " stroke=\"#fff\" stroke-width=\"1\"");  // apart from its neighbours
    }
    if (bar.conflict && bar.aged) absl::StrAppend(&html, " stroke-dasharray=\"4 2\"");
    const TraceJob& job = result.jobs[bar.job];
    absl::StrAppend(&html, "><title>", Escape(job.type), " ", Escape(job.id), " (",
                    Escape(KeyLabel(job.key)), ") ",
                    absl::StrFormat("%.2f-%.2f", bar.start, bar.end), "</title></rect>\n");
  }
  AppendAxis(html, kTop + rows * kRow + 4, area.left, area.plot, span,
             trace.workers.empty()
                 ? "seconds; red outline: waited on a conflict; dashed outline: aged into a "
                   "higher tier"
                 : "seconds; rows: each worker's slots; red outline: waited on a conflict; "
                   "dashed: aged into a higher tier; dotted: lost with its worker");
}

// The waits of each key: a dot per job, with its p50 and p99 ticks.
void AppendWaits(std::string& html, const ReportSummary& summary, const PlotArea& area) {
  constexpr int kRow = PlotArea::kRow, kTop = PlotArea::kTop;
  double worst = 0;
  for (const KeyReport& k : summary.keys) worst = std::max(worst, k.worst_wait);
  worst = std::max(worst, 1e-9);
  const int waits_height = kTop + static_cast<int>(summary.keys.size()) * kRow + 40;
  auto wx = [&](double w) { return area.left + area.plot * w / worst; };
  absl::StrAppend(&html,
                  "<h2>Waits per key</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                  "width=\"",
                  PlotArea::kWidth, "\" height=\"", waits_height, "\">\n");
  for (std::size_t i = 0; i < summary.keys.size(); ++i) {
    const KeyReport& k = summary.keys[i];
    const int y = kTop + static_cast<int>(i) * kRow + kRow / 2;
    absl::StrAppend(&html, "<text x=\"", area.left - 8, "\" y=\"", y + 4,
                    "\" font-size=\"11\" text-anchor=\"end\">", Escape(KeyLabel(k.key)),
                    "</text>\n");
    for (double w : k.waits) {
      absl::StrAppend(&html, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%d\" r=\"3.5\" "
                                             "fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                                             wx(w), y, ColourOf(i)));
    }
    if (!k.waits.empty()) {
      absl::StrAppend(&html, absl::StrFormat("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                                             "stroke=\"#1f4e9c\" stroke-width=\"2\"/>\n",
                                             wx(k.p50_wait), y - 8, wx(k.p50_wait), y + 8));
      absl::StrAppend(&html, absl::StrFormat("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                                             "stroke=\"#d62728\" stroke-width=\"2\"/>\n",
                                             wx(k.p99_wait), y - 8, wx(k.p99_wait), y + 8));
    }
  }
  AppendAxis(html, kTop + static_cast<int>(summary.keys.size()) * kRow + 4, area.left, area.plot,
             worst, "wait, seconds; blue tick: p50; red tick: p99");
}

}  // namespace

std::string RenderHtml(const std::string& title, const Trace& trace, const SimResult& result,
                       const ReportSummary& summary) {
  const Timeline timeline = LayOutTimeline(trace, result);
  PlotArea area;
  std::size_t longest = 0;
  for (const std::string& label : timeline.row_labels) longest = std::max(longest, label.size());
  area.left = std::max(70, 12 + static_cast<int>(6.5 * static_cast<double>(longest)));
  area.plot = PlotArea::kWidth - area.left - 20;
  std::string html;
  AppendSummary(html, title, trace, result, summary);
  AppendTimeline(html, trace, result, summary, timeline, area);
  AppendWaits(html, summary, area);
  absl::StrAppend(&html, "</body></html>\n");
  return html;
}

Status WriteReport(const std::string& dir, const std::string& title, const Trace& trace,
                   const SimResult& result) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot create the report directory: ", error.message()));
  }
  const std::string path = (std::filesystem::path(dir) / "index.html").string();
  std::ofstream file(path, std::ios::trunc);
  file << RenderHtml(title, trace, result, Summarize(trace, result));
  file.flush();
  if (!file) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write the report"));
  return absl::OkStatus();
}

}  // namespace fairgate::sim
