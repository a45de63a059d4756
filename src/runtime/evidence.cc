// ToJsonLine and the file sink of fairgate/evidence.h, and the names of fairgate/observer.h.
#include "fairgate/evidence.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "fairgate/observer.h"
#include "nlohmann/json.hpp"

namespace fairgate {

const char* JobEventKindName(JobEvent::Kind kind) {
  switch (kind) {
    case JobEvent::Kind::kAdmit:
      return "admit";
    case JobEvent::Kind::kComplete:
      return "complete";
    case JobEvent::Kind::kCancel:
      return "cancel";
    case JobEvent::Kind::kReject:
      return "reject";
    case JobEvent::Kind::kPromote:
      return "promote";
    case JobEvent::Kind::kEvict:
      return "evict";
    case JobEvent::Kind::kExpire:
      return "expire";
    case JobEvent::Kind::kShed:
      return "shed";
  }
  return "unknown";
}

std::string ToJsonLine(const AdmissionEvidence& e) {
  // nlohmann's ordered_json keeps the keys in the order written here.
  nlohmann::ordered_json line;
  line["t"] = e.time;
  line["type"] = e.type;
  line["id"] = e.id;
  line["key"] = e.key;
  line["order"] = {{"effective_tier", e.effective_tier},
                   {"aged", e.aged},
                   {"reserved", e.reserved},
                   {"accumulated_cost", e.accumulated_cost},
                   {"sjf", e.sjf},
                   {"arrival", e.arrival},
                   {"seq", e.seq}};
  line["tier"] = e.tier;
  line["estimate"] = e.estimate;
  line["estimate_source"] = e.estimate_source;
  line["weight"] = e.weight;
  line["skipped"] = {{"tier_cap", e.skipped_tier_cap},
                     {"type_cap", e.skipped_type_cap},
                     {"key_limit", e.skipped_key_limit},
                     {"conflict", e.skipped_conflict}};
  // Only multi-slot types are ever skipped for the global cap: records of schedulers without them
  // keep their shape.
  if (e.skipped_global_cap != 0) line["skipped"]["global_cap"] = e.skipped_global_cap;
  // Likewise without workers.
  if (e.skipped_worker != 0) line["skipped"]["worker"] = e.skipped_worker;
  // Likewise without rate limits.
  if (e.skipped_rate_limit != 0) line["skipped"]["rate_limit"] = e.skipped_rate_limit;
  if (!e.worker.empty()) {
    line["worker"] = e.worker;
    line["worker_reserved"] = e.worker_reserved;
  }
  if (e.borrowed) line["borrowed"] = true;
  // Keys and ids come from callers: replace what is not UTF-8 rather than throw.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<EvidenceSink> OpenEvidenceFile(const std::string& path) {
  std::FILE* raw = std::fopen(path.c_str(), "a");
  if (raw == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open evidence file '", path, "': ", std::strerror(errno)));
  }
  auto file = std::shared_ptr<std::FILE>(raw, [](std::FILE* f) { std::fclose(f); });
  return EvidenceSink([file](const AdmissionEvidence& e) {
    const std::string line = ToJsonLine(e) + "\n";
    std::fwrite(line.data(), 1, line.size(), file.get());
    std::fflush(file.get());
  });
}

}  // namespace fairgate
