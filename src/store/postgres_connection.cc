#include "store/postgres_connection.h"

#include <chrono>
#include <cstdio>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "store/postgres_statements.h"
#include "utf8cpp/utf8.h"

namespace fairgate::store::postgres {

absl::string_view ErrorOf(const PGconn* connection) {
  return absl::StripTrailingAsciiWhitespace(PQerrorMessage(connection));
}

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::string TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

bool TextCanHold(absl::string_view s) {
  return s.find('\0') == absl::string_view::npos && utf8::is_valid(s.begin(), s.end());
}

Status RequireText(absl::string_view s, absl::string_view what) {
  if (TextCanHold(s)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "PostgreSQL store: ", what, " must be UTF-8 without a NUL byte, as PostgreSQL's text is"));
}

std::string AsText(absl::string_view s) {
  if (TextCanHold(s)) return std::string(s);
  std::string valid;
  valid.reserve(s.size());
  utf8::replace_invalid(s.begin(), s.end(), std::back_inserter(valid));
  std::string text;
  text.reserve(valid.size());
  for (char c : valid) {
    if (c == '\0') {
      text += "\xEF\xBF\xBD";  // U+FFFD
    } else {
      text += c;
    }
  }
  return text;
}

bool Broken(const Link& link) {
  return link.lost || link.pg == nullptr || PQstatus(link.pg.get()) != CONNECTION_OK;
}

StatusOr<Result> Exec(Link& link, const char* sql, const std::vector<Param>& params,
                      const char* what) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const Param& p : params) {
    values.push_back(p.null ? nullptr : p.value.data());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  Result r;
  if (params.empty()) {
    r.reset(PQexec(link.pg.get(), sql));
  } else {
    // A statement with parameters is prepared once per connection: planning the claim costs
    // about a millisecond of the server's CPU on this machine, more than running it.
    auto [it, inserted] =
        link.prepared.try_emplace(sql, absl::StrCat("fairgate_", link.prepared.size()));
    if (inserted) {
      r.reset(PQprepare(link.pg.get(), it->second.c_str(), sql, static_cast<int>(params.size()),
                        nullptr));
      if (r == nullptr || PQresultStatus(r.get()) != PGRES_COMMAND_OK) link.prepared.erase(it);
    }
    if (!inserted || (r != nullptr && PQresultStatus(r.get()) == PGRES_COMMAND_OK)) {
      r.reset(PQexecPrepared(link.pg.get(), it->second.c_str(), static_cast<int>(params.size()),
                             values.data(), lengths.data(), formats.data(), 0));
    }
  }
  const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return r;
  const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = state != nullptr ? state : "";
  const std::string message = absl::StrCat("PostgreSQL: ", what, ": ", ErrorOf(link.pg.get()));
  // No SQLSTATE: libpq's own failure, the connection lost (its status may still say OK).
  if (code.empty()) link.lost = true;
  if (Broken(link) || code.rfind("08", 0) == 0 || code.rfind("57P", 0) == 0) {
    return absl::UnavailableError(message);  // the connection, or the server shutting down
  }
  if (code == "53100") return absl::ResourceExhaustedError(message);  // disk full
  if (code == "25006" || code == "42501") return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}
ConnectionPool::Session ConnectionPool::Take() {
  std::unique_lock lock(mutex_);
  returned_.wait(lock, [&] { return !idle_.empty() || links_ < max_links_; });
  if (idle_.empty()) {
    ++links_;
    return Session(this, std::make_unique<Link>());
  }
  std::unique_ptr<Link> link = std::move(idle_.back());
  idle_.pop_back();
  return Session(this, std::move(link));
}

void ConnectionPool::Return(std::unique_ptr<Link> link) {
  {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(link));
  }
  returned_.notify_one();
}

Status ConnectionPool::Connect(Link& link) {
  link.lost = false;
  link.prepared.clear();  // prepared statements belong to a connection
  link.pg.reset(PQconnectdb(conninfo_.c_str()));
  if (PQstatus(link.pg.get()) == CONNECTION_OK) {
    // The schema's "already exists, skipping" NOTICEs are not worth a line on stderr each.
    PQsetNoticeProcessor(
        link.pg.get(), [](void*, const char*) {}, nullptr);
    // A replica stopped in the middle of a transaction (SIGSTOP, a VM pause) would hold its
    // row locks for as long as it stays stopped, and a claim's transaction takes lease rows
    // that other replicas' claims and leases then wait for: the server ends such a
    // transaction once it has been idle for a while (ours are milliseconds long). And no JIT
    // (kSessionSettings says why).
    Result set(PQexec(link.pg.get(), kSessionSettings));
    if (set == nullptr || PQresultStatus(set.get()) != PGRES_COMMAND_OK) {
      Status s =
          absl::UnavailableError(absl::StrCat("PostgreSQL: set the session's settings (",
                                              kSessionSettings, "): ", ErrorOf(link.pg.get())));
      link.pg.reset();
      return s;
    }
  } else {
    Status s =
        absl::UnavailableError(absl::StrCat("PostgreSQL: connect: ", ErrorOf(link.pg.get())));
    link.pg.reset();
    return s;
  }
  return absl::OkStatus();
}

StatusOr<std::string> ConnectionPool::AssignedId(Link& link, const char* what) {
  StatusOr<Result> r = Exec(link, "SELECT pg_current_xact_id_if_assigned()", {}, what);
  if (!r.ok()) return r.status();
  if (PQgetisnull(r->get(), 0, 0)) return std::string();
  return std::string(PQgetvalue(r->get(), 0, 0));
}

StatusOr<bool> ConnectionPool::Committed(Link& link, const std::string& id, const char* what) {
  // The broken connection's backend ends its transaction once it sees the connection closed:
  // it commits one whose COMMIT it had read and aborts one it had not (and a server that
  // restarted has aborted every transaction it had not committed).
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(kCommittedWaitSeconds));
  for (;;) {
    StatusOr<Result> r =
        Exec(link, "SELECT pg_xact_status($1::xid8)", {{id}},
             absl::StrCat(what, ": look up whether its transaction committed").c_str());
    if (!r.ok()) return r.status();
    const std::string state = PQgetisnull(r->get(), 0, 0) ? "" : PQgetvalue(r->get(), 0, 0);
    if (state == "committed") return true;
    if (state == "aborted") return false;
    if (state != "in progress") {
      return absl::InternalError(absl::StrCat("PostgreSQL: ", what, ": transaction ", id,
                                              " is too old for the server to say whether it "
                                              "committed"));
    }
    if (std::chrono::steady_clock::now() >= until) {
      return absl::UnavailableError(absl::StrCat(
          "PostgreSQL: ", what, ": the connection broke during its COMMIT, and transaction ", id,
          " was still in progress ", kCommittedWaitSeconds,
          " s later: whether it took effect "
          "is not known"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status ConnectionPool::Unknown(const char* what, const Status& reconnect) {
  return absl::UnavailableError(absl::StrCat("PostgreSQL: ", what,
                                             ": the connection broke during its COMMIT, and "
                                             "whether it took effect is not known: ",
                                             reconnect.message()));
}

}  // namespace fairgate::store::postgres
