// A proxy between a test's PostgreSQL clients and its server (postgres_server.h) that loses the
// reply to a commit, as a network or a client host failing at that moment would: the server has
// committed, and the client sees its connection break without knowing it.
//
// It listens on a Unix socket of its own (conninfo() connects through it) and forwards both ways.
// Armed with a piece of SQL (LoseCommitOf), it watches each connection's requests (the simple
// query protocol's queries, and the extended protocol's statements as they are bound) and the
// server's ReadyForQuery messages that end them: the first transaction that executed a statement
// containing that piece and then ended (ReadyForQuery idle: committed, or a single statement's
// implicit transaction done) has the reply that ended it withheld, and that connection closed on
// both sides. One loss per arming; connections made after it pass as before. LoseEveryCommitOf
// loses them again and again instead.
#ifndef FAIRGATE_TESTS_LOST_REPLY_PROXY_H_
#define FAIRGATE_TESTS_LOST_REPLY_PROXY_H_

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "temp_dir.h"

namespace fairgate::testing {

class LostReplyProxy {
 public:
  explicit LostReplyProxy(const std::string& server_conninfo) {
    std::string host, port = "5432";
    PQconninfoOption* options = PQconninfoParse(server_conninfo.c_str(), nullptr);
    if (options == nullptr) throw std::runtime_error("LostReplyProxy: bad conninfo");
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val == nullptr) continue;
      const std::string key = o->keyword;
      if (key == "host") {
        host = o->val;
      } else if (key == "port") {
        port = o->val;
      } else {
        conninfo_ += key + "='" + o->val + "' ";
      }
    }
    PQconninfoFree(options);
    server_path_ = host + "/.s.PGSQL." + port;
    conninfo_ += "host='" + dir_.path() + "' port=" + port;
    listener_ = socket(AF_UNIX, SOCK_STREAM, 0);
    const sockaddr_un address = Address(dir_.path() + "/.s.PGSQL." + port);
    if (listener_ < 0 ||
        bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener_, 64) != 0 || pipe(wake_) != 0) {
      throw std::runtime_error("LostReplyProxy: cannot listen");
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~LostReplyProxy() {
    const char stop = 's';
    (void)!write(wake_[1], &stop, 1);
    thread_.join();
    for (auto& pair : pairs_) Close(*pair);
    close(listener_);
    close(wake_[0]);
    close(wake_[1]);
  }
  LostReplyProxy(const LostReplyProxy&) = delete;
  LostReplyProxy& operator=(const LostReplyProxy&) = delete;

  // Connects through the proxy to the server's database, as the server's conninfo does.
  const std::string& conninfo() const { return conninfo_; }

  // Arms the proxy: the next commit of a transaction that ran SQL containing `sql_part` loses its
  // reply. The test then makes the call whose transaction that is, and checks losses().
  // `meanwhile`, if given, runs on the proxy's thread once the commit is made and before the
  // client's connection closes (what other clients do while the client does not know yet).
  void LoseCommitOf(std::string sql_part, std::function<void()> meanwhile = {}) {
    std::lock_guard lock(mutex_);
    armed_ = std::move(sql_part);
    meanwhile_ = std::move(meanwhile);
  }
  // Until StopLosing: each commit of a transaction that ran SQL containing one of `sql_parts`
  // loses its reply, except a connection's first such commit. A client that makes a new
  // connection after a loss and tries its call again there is so answered, and learns what its
  // first try did; its next call on that connection loses its reply again.
  void LoseEveryCommitOf(std::vector<std::string> sql_parts) {
    std::lock_guard lock(mutex_);
    every_ = std::move(sql_parts);
  }
  void StopLosing() {
    std::lock_guard lock(mutex_);
    every_.clear();
  }
  int losses() const {
    std::lock_guard lock(mutex_);
    return losses_;
  }

 private:
  // One client's connection and the server connection made for it.
  struct Pair {
    int client = -1, server = -1;
    std::string from_client, from_server;           // bytes not yet a whole message
    bool started = false;                           // the client's untyped startup message is past
    std::map<std::string, std::string> statements;  // prepared statement's name -> its SQL
    // Whether a request or transaction executes SQL that LoseCommitOf (`once`) or
    // LoseEveryCommitOf (`every`) names.
    struct Marks {
      bool once = false, every = false;
      Marks& operator|=(const Marks& other) {
        once |= other.once;
        every |= other.every;
        return *this;
      }
    };
    Marks request_marked;        // the request being sent
    std::deque<Marks> requests;  // requests sent and not yet answered
    Marks transaction_marked;    // the transaction under way
    bool spared = false;         // a commit LoseEveryCommitOf names was answered
    std::string reply;           // the server's messages held until a request's end
  };

  static sockaddr_un Address(const std::string& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path) throw std::runtime_error("socket path too long");
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    return address;
  }

  static std::uint32_t Length(const std::string& bytes, std::size_t at) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
           b[3];
  }

  static bool SendAll(int fd, const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }

  static void Close(Pair& pair) {
    if (pair.client >= 0) close(pair.client);
    if (pair.server >= 0) close(pair.server);
    pair.client = pair.server = -1;
  }

  void Serve() {
    for (;;) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      for (auto& pair : pairs_) {
        fds.push_back({pair->client, POLLIN, 0});
        fds.push_back({pair->server, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) return;
      // The pairs polled (fds holds two entries for each, after the first two); one accepted
      // below is polled from the next round on.
      for (std::size_t i = 0; 2 + 2 * i < fds.size(); ++i) {
        Pair& pair = *pairs_[i];
        bool open = true;
        if (fds[2 + 2 * i].revents != 0) open = FromClient(pair);
        if (open && fds[3 + 2 * i].revents != 0) open = FromServer(pair);
        if (!open) Close(pair);
      }
      std::erase_if(pairs_, [](const std::unique_ptr<Pair>& pair) { return pair->client < 0; });
      if (fds[1].revents & POLLIN) Accept();
    }
  }

  void Accept() {
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = socket(AF_UNIX, SOCK_STREAM, 0);
    const sockaddr_un address = Address(server_path_);
    if (server < 0 ||
        connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      close(client);
      if (server >= 0) close(server);
      return;
    }
    auto pair = std::make_unique<Pair>();
    pair->client = client;
    pair->server = server;
    pairs_.push_back(std::move(pair));
  }

  // Forwards what the client sent, and notes its requests. False once either side is gone.
  bool FromClient(Pair& pair) {
    char buffer[65536];
    const ssize_t n = recv(pair.client, buffer, sizeof buffer, 0);
    if (n <= 0 || !SendAll(pair.server, buffer, static_cast<std::size_t>(n))) return false;
    pair.from_client.append(buffer, static_cast<std::size_t>(n));
    std::string armed;
    std::vector<std::string> every;
    {
      std::lock_guard lock(mutex_);
      armed = armed_;
      every = every_;
    }
    for (;;) {
      std::string& in = pair.from_client;
      if (!pair.started) {  // the startup message: a length, no type
        if (in.size() < 4 || in.size() < Length(in, 0)) return true;
        in.erase(0, Length(in, 0));
        pair.started = true;
        continue;
      }
      if (in.size() < 5 || in.size() < 1 + Length(in, 1)) return true;
      const char type = in[0];
      const std::string body = in.substr(5, Length(in, 1) - 4);
      in.erase(0, 1 + Length(in, 1));
      auto marks = [&](const std::string& sql) {
        Pair::Marks m;
        m.once = !armed.empty() && sql.find(armed) != std::string::npos;
        for (const std::string& part : every) m.every |= sql.find(part) != std::string::npos;
        return m;
      };
      if (type == 'P') {  // Parse: name, query
        const std::string name = body.c_str();
        pair.statements[name] = body.c_str() + name.size() + 1;
      } else if (type == 'B') {  // Bind: portal, statement
        const std::string portal = body.c_str();
        pair.request_marked |= marks(pair.statements[body.c_str() + portal.size() + 1]);
      } else if (type == 'Q' || type == 'S') {  // a simple query, or the extended ones' Sync
        if (type == 'Q') pair.request_marked |= marks(body.c_str());
        pair.requests.push_back(pair.request_marked);
        pair.request_marked = {};
      }
    }
  }

  // Forwards what the server sent, holding each request's reply until it is whole, and loses
  // the one that ends an armed transaction. False once either side is gone.
  bool FromServer(Pair& pair) {
    char buffer[65536];
    const ssize_t n = recv(pair.server, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    pair.from_server.append(buffer, static_cast<std::size_t>(n));
    for (;;) {
      std::string& in = pair.from_server;
      if (in.size() < 5 || in.size() < 1 + Length(in, 1)) return true;
      const std::size_t size = 1 + Length(in, 1);
      const char type = in[0];
      const char state = size > 5 ? in[5] : 0;
      pair.reply.append(in, 0, size);
      in.erase(0, size);
      if (type != 'Z') {  // not a ReadyForQuery: forwarded now if no request awaits it
        if (pair.requests.empty() && !Forward(pair)) return false;
        continue;
      }
      if (!pair.requests.empty()) {
        pair.transaction_marked |= pair.requests.front();
        pair.requests.pop_front();
      }
      if (state == 'I' && (pair.transaction_marked.once || pair.transaction_marked.every)) {
        bool lose = false;
        std::function<void()> meanwhile;
        {
          std::lock_guard lock(mutex_);
          if (pair.transaction_marked.once && !armed_.empty()) {
            lose = true;
            armed_.clear();
            meanwhile = std::move(meanwhile_);
          } else if (pair.transaction_marked.every && !every_.empty()) {
            lose = std::exchange(pair.spared, true);
          }
          if (lose) ++losses_;
        }
        if (lose) {
          if (meanwhile) meanwhile();
          return false;  // the reply is not sent: the connection closes
        }
      }
      if (state == 'I') pair.transaction_marked = {};
      if (!Forward(pair)) return false;
    }
  }

  bool Forward(Pair& pair) {
    const bool sent = SendAll(pair.client, pair.reply.data(), pair.reply.size());
    pair.reply.clear();
    return sent;
  }

  TempDir dir_;
  std::string conninfo_, server_path_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<std::unique_ptr<Pair>> pairs_;  // the proxy's thread's alone
  mutable std::mutex mutex_;                  // guards armed_, meanwhile_, every_ and losses_
  std::string armed_;
  std::function<void()> meanwhile_;
  std::vector<std::string> every_;
  int losses_ = 0;
  std::thread thread_;
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_LOST_REPLY_PROXY_H_
