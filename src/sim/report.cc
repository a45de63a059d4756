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

// A colour per job type, for the stripe along the foot of its bars: darker than the keys'.
std::string TypeColourOf(std::size_t index) {
  static const char* kPalette[] = {"#222222", "#8c564b", "#1f77b4", "#2ca02c",
                                   "#9467bd", "#d62728", "#7f7f7f", "#17becf"};
  constexpr std::size_t kSize = sizeof kPalette / sizeof kPalette[0];
  if (index < kSize) return kPalette[index];
  return absl::StrFormat("hsl(%d,60%%,30%%)", static_cast<int>((index * 97) % 360));
}

// The keys the page shows, by index in the summary: every key while there are at most kMaxKeys,
// in order of first appearance; else the kMaxKeys whose p99 wait is highest, highest first
// (ties by first appearance).
std::vector<std::size_t> ShownKeys(const ReportSummary& summary) {
  std::vector<std::size_t> shown(summary.keys.size());
  for (std::size_t i = 0; i < shown.size(); ++i) shown[i] = i;
  if (shown.size() <= kMaxKeys) return shown;
  std::stable_sort(shown.begin(), shown.end(), [&](std::size_t a, std::size_t b) {
    return summary.keys[a].p99_wait > summary.keys[b].p99_wait;
  });
  shown.resize(kMaxKeys);
  return shown;
}

// The timeline's rows and bars: each admitted job takes the lowest free slot (of its worker's,
// with workers), and gives it back when it completes or is lost with its worker. Only the slots
// that ran something are drawn; with more than kMaxRows of them, each row holds `lanes` slots.
struct Timeline {
  struct Bar {
    double start, end;
    int row;   // after LayOutTimeline: the row drawn
    int lane;  // and the slot's lane in it (0 unless grouped)
    std::size_t job;
    bool conflict, aged, lost;
    std::size_t joined;  // requests that joined its run
  };
  std::vector<std::string> row_labels;
  int lanes = 1;
  int slots = 0;       // slots (or worker slots) in all
  int slots_used = 0;  // of them, those that ran something
  std::vector<Bar> bars;
  double end_time = 0;
};

// Every slot's label: the scheduler's slots, or each worker's (a name that comes back keeps its
// slots: the most it had), with each worker's (first slot, slots) in `slots_of_worker`.
std::vector<std::string> SlotLabels(const Trace& trace,
                                    std::map<std::string, std::pair<int, int>>& slots_of_worker) {
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
    if (slots_of_worker.count(w.name) > 0) continue;
    slots_of_worker[w.name] = {static_cast<int>(labels.size()), slots[w.name]};
    for (int r = 0; r < slots[w.name]; ++r) labels.push_back(absl::StrCat(w.name, " ", r + 1));
  }
  return labels;
}

// Keeps the rows of the slots that ran something, in slot order, grouped `lanes` to a row when
// there are more than kMaxRows of them.
void KeepUsedRows(const std::vector<std::string>& slot_labels, Timeline& timeline) {
  std::vector<int> used_index(slot_labels.size(), -1);
  for (const Timeline::Bar& bar : timeline.bars) used_index[static_cast<std::size_t>(bar.row)] = 0;
  std::vector<std::size_t> used;
  for (std::size_t slot = 0; slot < slot_labels.size(); ++slot) {
    if (used_index[slot] < 0) continue;
    used_index[slot] = static_cast<int>(used.size());
    used.push_back(slot);
  }
  timeline.slots = static_cast<int>(slot_labels.size());
  timeline.slots_used = static_cast<int>(used.size());
  const std::size_t lanes = (used.size() + kMaxRows - 1) / kMaxRows;
  timeline.lanes = static_cast<int>(std::max<std::size_t>(1, lanes));
  for (std::size_t first = 0; first < used.size(); first += timeline.lanes) {
    const std::size_t last = std::min(used.size(), first + timeline.lanes) - 1;
    timeline.row_labels.push_back(
        first == last ? slot_labels[used[first]]
                      : absl::StrCat(slot_labels[used[first]], " - ", slot_labels[used[last]]));
  }
  for (Timeline::Bar& bar : timeline.bars) {
    const int index = used_index[static_cast<std::size_t>(bar.row)];
    bar.row = index / timeline.lanes;
    bar.lane = index % timeline.lanes;
  }
}

Timeline LayOutTimeline(const Trace& trace, const SimResult& result) {
  std::map<std::string, int> priority_of;
  for (const auto& [name, config] : trace.types) priority_of[name] = config.priority;
  std::map<std::string, std::pair<int, int>> slots_of_worker;
  const std::vector<std::string> slot_labels = SlotLabels(trace, slots_of_worker);
  Timeline timeline;
  std::vector<Timeline::Bar>& bars = timeline.bars;
  std::vector<bool> busy(slot_labels.size(), false);
  std::map<std::size_t, std::size_t> bar_of_job;
  std::map<std::size_t, std::size_t> joined_to;  // a run's lead -> requests that joined it
  for (const SimEvent& e : result.events) {
    timeline.end_time = std::max(timeline.end_time, e.t);
    if (e.kind == SimEvent::Kind::kJoin) {
      ++joined_to[e.lead];
    } else if (e.kind == SimEvent::Kind::kAdmit) {
      auto first = busy.begin(), last = busy.end();
      if (auto it = slots_of_worker.find(e.worker); it != slots_of_worker.end()) {
        first = busy.begin() + it->second.first;
        last = first + it->second.second;
      }
      auto free = std::find(first, last, false);
      if (free == last) free = std::find(busy.begin(), busy.end(), false);  // never: a guard
      if (free == busy.end()) continue;
      const auto row = static_cast<int>(free - busy.begin());
      busy[static_cast<std::size_t>(row)] = true;
      bar_of_job[e.job] = bars.size();
      bars.push_back({e.t, e.t, row, 0, e.job, e.waited_on_conflict,
                      e.effective_priority != priority_of[result.jobs[e.job].type], false, 0});
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
    if (auto it = joined_to.find(bar.job); it != joined_to.end()) bar.joined = it->second;
  }
  KeepUsedRows(slot_labels, timeline);
  return timeline;
}

// Where the report's plots are drawn, in pixels.
struct PlotArea {
  static constexpr int kWidth = 960, kRow = 22, kTop = 10;
  int left = 70;  // room for the longest row label (about 6.5 px a character at 11 px)
  int plot = 0;   // the plot's width
};

// The page's head and its summary line.
void AppendHead(std::string& html, const std::string& title, const Trace& trace,
                const SimResult& result, const ReportSummary& summary) {
  absl::StrAppend(
      &html, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>", Escape(title),
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse;margin-bottom:8px}td,th{padding:3px 10px;text-align:right;"
      "border-bottom:1px solid #ddd}th{background:#f3f3f3}td:first-child,th:first-child"
      "{text-align:left}.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;"
      "vertical-align:middle}.stripe{display:inline-block;width:14px;height:4px;margin-right:6px;"
      "vertical-align:middle}.note{color:#666;font-size:13px}</style></head><body>\n<h1>",
      Escape(title), "</h1>\n<p>", result.jobs.size(), " jobs, capacity ",
      trace.options.rule.max_concurrency, ", ", Escape(trace.mode), " mode",
      trace.options.rule.aging ? ", aging" : "", ". Utilization <b>",
      absl::StrFormat("%.1f%%", 100 * summary.utilization),
      "</b>, Jain's fairness index of the "
      "keys' mean slowdowns <b>",
      absl::StrFormat("%.3f", summary.jain_index), "</b>.</p>\n");
}

// The table of the keys shown (ShownKeys).
void AppendKeys(std::string& html, const ReportSummary& summary,
                const std::vector<std::size_t>& shown) {
  absl::StrAppend(&html,
                  "<h2>Keys</h2>\n<table><tr><th>key</th><th>jobs</th><th>admitted</th>"
                  "<th>mean wait</th><th>p50</th><th>p99</th><th>worst</th>"
                  "<th>mean slowdown</th></tr>\n");
  for (const std::size_t i : shown) {
    const KeyReport& k = summary.keys[i];
    absl::StrAppend(
        &html, "<tr><td><span class=\"swatch\" style=\"background:", ColourOf(i), "\"></span>",
        Escape(KeyLabel(k.key)), "</td><td>", k.jobs, "</td><td>", k.admitted, "</td>",
        absl::StrFormat("<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
                        "<td>%.2f</td></tr>\n",
                        k.mean_wait, k.p50_wait, k.p99_wait, k.worst_wait, k.mean_slowdown));
  }
  absl::StrAppend(&html, "</table>\n");
  if (shown.size() < summary.keys.size()) {
    absl::StrAppend(&html, "<p class=\"note\">The ", shown.size(), " of ", summary.keys.size(),
                    " keys whose p99 wait is highest, highest first.</p>\n");
  }
}

// The table of the groups of keys, if the trace names any.
void AppendGroups(std::string& html, const ReportSummary& summary) {
  if (summary.groups.empty()) return;
  absl::StrAppend(&html,
                  "<h2>Groups of keys</h2>\n<table><tr><th>group</th><th>keys</th><th>jobs</th>"
                  "<th>admitted</th><th>mean wait</th><th>p50</th><th>p99</th><th>worst</th>"
                  "</tr>\n");
  for (const GroupReport& g : summary.groups) {
    absl::StrAppend(&html, "<tr><td>", Escape(g.group), "</td><td>", g.keys, "</td><td>", g.jobs,
                    "</td><td>", g.admitted, "</td>",
                    absl::StrFormat("<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>\n",
                                    g.mean_wait, g.p50_wait, g.p99_wait, g.worst_wait));
  }
  absl::StrAppend(&html, "</table>\n");
}

// The table of the types, with their stripes' colours; with coalescing, the requests that
// joined a run and their end-to-end time.
void AppendTypes(std::string& html, const ReportSummary& summary) {
  absl::StrAppend(&html,
                  "<h2>Types</h2>\n<table><tr><th>type</th><th>tier</th><th>jobs</th>"
                  "<th>admitted</th><th>mean wait</th><th>p50</th><th>p99</th><th>worst</th>"
                  "<th>mean run</th>");
  if (summary.coalesced) {
    absl::StrAppend(&html, "<th>joined a run</th><th>joined: end to end p50</th><th>p99</th>");
  }
  absl::StrAppend(&html, "</tr>\n");
  for (std::size_t i = 0; i < summary.types.size(); ++i) {
    const TypeReport& t = summary.types[i];
    absl::StrAppend(&html, "<tr><td><span class=\"stripe\" style=\"background:", TypeColourOf(i),
                    "\"></span>", Escape(t.type), "</td><td>", t.priority, "</td><td>", t.jobs,
                    "</td><td>", t.admitted, "</td>",
                    absl::StrFormat("<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
                                    "<td>%.2f</td>",
                                    t.mean_wait, t.p50_wait, t.p99_wait, t.worst_wait, t.mean_run));
    if (summary.coalesced) {
      absl::StrAppend(&html, "<td>", t.joined, "</td>",
                      absl::StrFormat("<td>%.2f</td><td>%.2f</td>", t.joined_p50_end_to_end,
                                      t.joined_p99_end_to_end));
    }
    absl::StrAppend(&html, "</tr>\n");
  }
  absl::StrAppend(&html, "</table>\n");
  if (summary.coalesced) {
    absl::StrAppend(&html,
                    "<p class=\"note\">A request that joined a run of its id (coalescing) is "
                    "counted among its type's jobs and waits; its end to end is from its arrival "
                    "to the end of the run it joined.</p>\n");
  }
}

// One run's bar: coloured by its key, its type's stripe along its foot, its type's name (and the
// requests that joined it) on it when they fit, its outline saying how it waited or ended.
void AppendBar(std::string& html, const Timeline& timeline, const Timeline::Bar& bar, double x,
               double width, const std::string& key_colour, const std::string& type_colour,
               const TraceJob& job, const std::string& key_label) {
  constexpr int kRow = PlotArea::kRow, kTop = PlotArea::kTop;
  const double lane_height = static_cast<double>(kRow - 4) / timeline.lanes;
  const double y = kTop + bar.row * kRow + 2 + bar.lane * lane_height;
  absl::StrAppend(&html, absl::StrFormat("<rect x=\"%.1f\" y=\"%.2f\" width=\"%.1f\" "
                                         "height=\"%.2f\" fill=\"%s\"",
                                         x, y, width, lane_height, key_colour));
  if (bar.lost) {  // ended with its worker
    absl::StrAppend(&html, " stroke=\"#000\" stroke-width=\"2\" stroke-dasharray=\"1 2\"");
  } else if (bar.conflict) {
    absl::StrAppend(&html, " stroke=\"#d62728\" stroke-width=\"2\"");
  } else if (bar.aged) {
    absl::StrAppend(&html, " stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"");
  } else if (timeline.lanes == 1) {
    absl::StrAppend(&html, " stroke=\"#fff\" stroke-width=\"1\"");  // apart from its neighbours
  }
  if (bar.conflict && bar.aged) absl::StrAppend(&html, " stroke-dasharray=\"4 2\"");
  const std::string joined = bar.joined > 0 ? absl::StrCat(" +", bar.joined, " joined") : "";
  absl::StrAppend(&html, "><title>", Escape(job.type), " ", Escape(job.id), " (", Escape(key_label),
                  ") ", absl::StrFormat("%.2f-%.2f", bar.start, bar.end), joined,
                  "</title></rect>\n");
  if (timeline.lanes > 1) return;  // a lane is too thin for a stripe or a name
  absl::StrAppend(&html, absl::StrFormat("<rect x=\"%.1f\" y=\"%.2f\" width=\"%.1f\" "
                                         "height=\"4\" fill=\"%s\"/>\n",
                                         x, y + lane_height - 4, width, type_colour));
  const std::string label =
      absl::StrCat(job.type, bar.joined > 0 ? absl::StrCat(" +", bar.joined) : std::string());
  if (width >= 6.0 * static_cast<double>(label.size()) + 6) {
    absl::StrAppend(&html, absl::StrFormat("<text x=\"%.1f\" y=\"%.2f\" font-size=\"10\" "
                                           "fill=\"#000\" fill-opacity=\"0.8\">%s</text>\n",
                                           x + 3, y + 11, Escape(label)));
  }
}

// The timeline: a row per slot (or worker slot) that ran something, or per group of them, a bar
// per run.
void AppendTimeline(std::string& html, const Trace& trace, const SimResult& result,
                    const ReportSummary& summary, const Timeline& timeline, const PlotArea& area) {
  std::map<std::string, std::size_t> key_index, type_index;
  for (std::size_t i = 0; i < summary.keys.size(); ++i) key_index[summary.keys[i].key] = i;
  for (std::size_t i = 0; i < summary.types.size(); ++i) type_index[summary.types[i].type] = i;
  const double span = timeline.end_time > 0 ? timeline.end_time : 1;  // an axis of 0-1 if empty
  auto x = [&](double t) { return area.left + area.plot * t / span; };
  constexpr int kRow = PlotArea::kRow, kTop = PlotArea::kTop;
  const int rows = static_cast<int>(timeline.row_labels.size());
  const char* what = trace.workers.empty() ? "slots" : "worker slots";
  absl::StrAppend(&html, "<h2>", trace.workers.empty() ? "Slots over time" : "Workers over time",
                  "</h2>\n<p class=\"note\">", timeline.slots_used, " of ", timeline.slots, " ",
                  what, " ran something");
  if (timeline.lanes > 1) {
    absl::StrAppend(&html, "; each row holds up to ", timeline.lanes,
                    " of them, one thin lane each");
  }
  absl::StrAppend(&html, ". Types:");
  for (std::size_t i = 0; i < summary.types.size(); ++i) {
    absl::StrAppend(&html, " <span class=\"stripe\" style=\"background:", TypeColourOf(i),
                    "\"></span>", Escape(summary.types[i].type));
  }
  absl::StrAppend(&html, "</p>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                  PlotArea::kWidth, "\" height=\"", kTop + rows * kRow + 40, "\">\n");
  for (int r = 0; r < rows; ++r) {
    absl::StrAppend(&html, "<text x=\"", area.left - 8, "\" y=\"", kTop + r * kRow + 15,
                    "\" font-size=\"11\" text-anchor=\"end\">",
                    Escape(timeline.row_labels[static_cast<std::size_t>(r)]), "</text>\n");
  }
  for (const Timeline::Bar& bar : timeline.bars) {
    const TraceJob& job = result.jobs[bar.job];
    AppendBar(html, timeline, bar, x(bar.start), std::max(1.0, x(bar.end) - x(bar.start)),
              ColourOf(key_index[job.key]), TypeColourOf(type_index[job.type]), job,
              KeyLabel(job.key));
  }
  AppendAxis(html, kTop + rows * kRow + 4, area.left, area.plot, span,
             trace.workers.empty()
                 ? "seconds; colour: key; stripe: type; red outline: waited on a conflict; "
                   "dashed: aged into a higher tier"
                 : "seconds; colour: key; stripe: type; red outline: waited on a conflict; "
                   "dashed: aged into a higher tier; dotted: lost with its worker");
}

// The waits of each key shown: a dot per job, with its p50 and p99 ticks.
void AppendWaits(std::string& html, const ReportSummary& summary,
                 const std::vector<std::size_t>& shown, const PlotArea& area) {
  constexpr int kRow = PlotArea::kRow, kTop = PlotArea::kTop;
  double worst = 0;
  for (const std::size_t i : shown) worst = std::max(worst, summary.keys[i].worst_wait);
  if (worst <= 0) worst = 1;  // nobody waited: an axis of 0-1 s
  const int rows = static_cast<int>(shown.size());
  auto wx = [&](double w) { return area.left + area.plot * w / worst; };
  absl::StrAppend(&html,
                  "<h2>Waits per key</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                  "width=\"",
                  PlotArea::kWidth, "\" height=\"", kTop + rows * kRow + 40, "\">\n");
  for (int row = 0; row < rows; ++row) {
    const std::size_t i = shown[static_cast<std::size_t>(row)];
    const KeyReport& k = summary.keys[i];
    const int y = kTop + row * kRow + kRow / 2;
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
  AppendAxis(html, kTop + rows * kRow + 4, area.left, area.plot, worst,
             "wait, seconds; blue tick: p50; red tick: p99");
}

}  // namespace

std::string RenderHtml(const std::string& title, const Trace& trace, const SimResult& result,
                       const ReportSummary& summary) {
  const Timeline timeline = LayOutTimeline(trace, result);
  const std::vector<std::size_t> shown = ShownKeys(summary);
  PlotArea area;
  std::size_t longest = 0;
  for (const std::string& label : timeline.row_labels) longest = std::max(longest, label.size());
  for (const std::size_t i : shown)
    longest = std::max(longest, KeyLabel(summary.keys[i].key).size());
  area.left = std::max(70, 12 + static_cast<int>(6.5 * static_cast<double>(longest)));
  area.plot = PlotArea::kWidth - area.left - 20;
  std::string html;
  AppendHead(html, title, trace, result, summary);
  AppendKeys(html, summary, shown);
  AppendGroups(html, summary);
  AppendTypes(html, summary);
  AppendTimeline(html, trace, result, summary, timeline, area);
  AppendWaits(html, summary, shown, area);
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
