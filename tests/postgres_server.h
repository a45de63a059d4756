// A throwaway PostgreSQL server for a test: started by scripts/pg_temp.sh in a temporary
// directory, on a Unix socket there, stopped and removed at the end (or when the test's process
// dies: a watcher of its own, PostgresServer's constructor). The directory is in /dev/shm
// where that is a writable directory (memory: the server runs with fsync off anyway, and creating
// its thousand files there takes a tenth of the time), and the data directory is copied from a
// template in the build tree (FAIRGATE_TEST_PG_TEMPLATE) rather than made by initdb each time.
#ifndef FAIRGATE_TESTS_POSTGRES_SERVER_H_
#define FAIRGATE_TESTS_POSTGRES_SERVER_H_

#include <libpq-fe.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "temp_dir.h"

namespace fairgate::testing {

class PostgresServer {
 public:
  PostgresServer() {
    chmod(dir_.path().c_str(), 0755);  // the server's user must reach its socket's directory
    conninfo_ = Script("start");
    while (!conninfo_.empty() && conninfo_.back() == '\n') conninfo_.pop_back();
    if (conninfo_.empty()) throw std::runtime_error("pg_temp.sh start failed");
    // Stops the server and removes its directory when this process ends, however it ends (a
    // check that aborts, a crash, ctest's kill at its timeout): a shell in a session of its own
    // (so that a kill of the test's process group leaves it) reads a pipe that only this process
    // writes (close-on-exec: the processes a test starts hold no end of it), whose end comes
    // with this process's.
    watcher_ = popen(("exec setsid sh -c \"cat >/dev/null; " + ScriptLine("stop") +
                      " >/dev/null 2>&1; rm -rf '" + dir_.path() + "'\"")
                         .c_str(),
                     "we");
  }
  ~PostgresServer() {
    // Ends the watcher, which then stops the server and removes the directory (TempDir finds
    // none), and waits for it; without one, stops the server here.
    if (watcher_ != nullptr) {
      pclose(watcher_);
    } else {
      Script("stop");
    }
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  const std::string& conninfo() const { return conninfo_; }
  // The temporary directory that holds the server's data and socket.
  const std::string& directory() const { return dir_.path(); }
  // Stops the server (immediately, as a crash would) and starts it again on the same data.
  void Stop() { Script("stop"); }
  void Start() { Script("start-again"); }
  // Runs `sql` on a connection of its own; the first column of its first row ("" if none).
  std::string Sql(const std::string& sql) const { return SqlAt(conninfo_, sql); }
  // The same on the database `conninfo` names (another database of this server).
  static std::string SqlAt(const std::string& conninfo, const std::string& sql) {
    PGconn* c = PQconnectdb(conninfo.c_str());
    PGresult* r = PQexec(c, sql.c_str());
    std::string value;
    if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK) {
      PQclear(r);
      PQfinish(c);
      throw std::runtime_error("SQL failed: " + sql);
    }
    if (PQntuples(r) > 0 && PQnfields(r) > 0) value = PQgetvalue(r, 0, 0);
    PQclear(r);
    PQfinish(c);
    return value;
  }

 private:
  // The shell's command line that runs scripts/pg_temp.sh `command` on this server's directory.
  std::string ScriptLine(const std::string& command) const {
    std::string line;
#ifdef FAIRGATE_TEST_PG_TEMPLATE
    line = "FAIRGATE_PG_TEMPLATE='" FAIRGATE_TEST_PG_TEMPLATE "' ";
#endif
    return line + std::string(FAIRGATE_SOURCE_DIR) + "/scripts/pg_temp.sh " + command + " '" +
           dir_.path() + "'";
  }

  std::string Script(const std::string& command) {
    std::FILE* pipe = popen(ScriptLine(command).c_str(), "re");
    if (pipe == nullptr) return {};
    std::string out;
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
    pclose(pipe);
    return out;
  }

  static std::filesystem::path Parent() {
    return access("/dev/shm", W_OK | X_OK) == 0 ? std::filesystem::path("/dev/shm")
                                                : std::filesystem::temp_directory_path();
  }

  TempDir dir_{Parent()};
  std::string conninfo_;
  std::FILE* watcher_ = nullptr;
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_POSTGRES_SERVER_H_
