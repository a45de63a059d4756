// The mirror as several replicas (GateConfig::database): two MirrorServers, each with its own
// scheduler and its own connections, sharing one mirror directory and one PostgreSQL server
// (started by scripts/pg_temp.sh in a temporary directory), driven by real git clients. Each
// test runs once as a fleet and once as islands (the same two servers without the database), and
// checks that the fleet behaves as one scheduler where the islands do not: a client's cost counts
// on every replica, and a repository's writers exclude each other across replicas. Every wait is
// for a condition, with a bound.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "mirror_server.h"
#include "mirror_test_util.h"
#include "nlohmann/json.hpp"
#include "postgres_server.h"

namespace git_mirror {
namespace {
namespace fleet_test {

using namespace git_mirror::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

// Two replicas, "a" and "b", of a mirror of one upstream (`tools.git`) on one mirror directory;
// with `fleet`, they share a database.
struct TwoReplicas {
  fairgate::testing::PostgresServer database;
  OneUpstream up{3};
  TempDir shared;  // the mirror directory
  std::unique_ptr<ServerUnderTest> a, b;

  TwoReplicas(bool fleet, GateConfig config_a, GateConfig config_b, int repack_after = 10) {
    if (fleet) {
      config_a.database = config_b.database = database.conninfo();
      config_a.replica = "a";
      config_b.replica = "b";
    }
    auto same_dir = [&](MirrorOptions& o) { o.mirror_dir = (shared.path / "mirrors").string(); };
    a = std::make_unique<ServerUnderTest>(up.repositories, config_a, 0ms, false, repack_after,
                                          same_dir);
    b = std::make_unique<ServerUnderTest>(up.repositories, config_b, 0ms, false, repack_after,
                                          same_dir);
  }
};

// The accumulated cost of `client` in a replica's scheduler (0 if it has none).
double CostOf(const ServerUnderTest& replica, const std::string& client) {
  const json state = replica.Debug();
  for (const json& k : state["heaviest_keys"]) {
    if (k["key"] == client) return k["accumulated_cost"].get<double>();
  }
  return 0;
}

// The clients of `replica`'s "start" events, in order.
std::vector<std::string> Starts(const ServerUnderTest& replica) {
  std::vector<std::string> clients;
  for (const json& e : replica.Events()) {
    if (e["event"] == "start") clients.push_back(e["client"].get<std::string>());
  }
  return clients;
}

// Checks that `response` is a refusal for want of a token of a bucket that gives one every 100 s:
// 429 and a Retry-After of 1 to 100 s. Returns that Retry-After.
int CheckRefusedForToken(const RawResponse& response) {
  CAPTURE(response.head);
  CAPTURE(response.body);
  CHECK(response.status == 429);
  const std::size_t at = response.head.find("Retry-After: ");
  REQUIRE(at != std::string::npos);
  const int retry_after = std::atoi(response.head.c_str() + at + 13);
  CHECK(retry_after >= 1);
  CHECK(retry_after <= 100);
  return retry_after;
}

TEST_CASE("GitMirror.Fleet.AClientsCostCountsOnEveryReplica") {
  for (const bool fleet : {true, false}) {
    CAPTURE(fleet);
    // Replica b runs one job at a time, so the order of its waiting clients shows.
    TwoReplicas replicas(fleet, GateConfig{.capacity = 4},
                         GateConfig{.capacity = 1, .sync_clone_slots = 1, .background_slots = 1});
    ServerUnderTest& a = *replicas.a;
    ServerUnderTest& b = *replicas.b;
    const fs::path& work = replicas.up.work.path;
    // Alice clones three times through replica a (the first makes the mirror, for both).
    for (int i = 0; i < 3; ++i) {
      RequireClone(a.Url("tools.git"), work / ("a" + std::to_string(i)), "alice");
    }
    // Charged when each job ends (a moment after git has its pack).
    REQUIRE(Eventually([&] { return a.Debug()["running"] == 0 && CostOf(a, "alice") > 0; }));

    // On replica b, carol's clone holds the one slot; alice asks, then bob.
    PackHold hold(work);
    std::vector<std::thread> clones;
    std::vector<int> exit_codes(3, -1);
    auto start = [&](int i, const std::string& client) {
      clones.emplace_back([&, i, client] {
        auto r = Clone(b.Url("tools.git"), work / ("b" + std::to_string(i)), client);
        exit_codes[i] = r.ok() ? r->exit_code : -2;
      });
    };
    start(0, "carol");
    REQUIRE(Eventually([&] { return hold.Held() == 1; }));
    start(1, "alice");
    REQUIRE(Eventually([&] { return b.Debug()["pending"] == 1; }));
    start(2, "bob");
    REQUIRE(Eventually([&] { return b.Debug()["pending"] == 2; }));
    if (fleet) {
      // Within about a second of alice's waiting on b, b has her cost from a.
      REQUIRE(Eventually([&] { return CostOf(b, "alice") >= CostOf(a, "alice"); }));
    } else {
      CHECK(CostOf(b, "alice") == 0);  // b knows nothing of what she did on a
    }
    hold.Release();
    for (auto& t : clones) t.join();
    CHECK(exit_codes == std::vector<int>{0, 0, 0});
    // After carol's (her ref listing and her clone): as a fleet, bob first (alice has used
    // more, elsewhere); as islands, alice first (both new to b; she asked first).
    const std::vector<std::string> starts = Starts(b);
    const auto after_carol = std::find_if(starts.begin(), starts.end(),
                                          [](const std::string& c) { return c != "carol"; });
    REQUIRE(after_carol != starts.end());
    CHECK(*after_carol == (fleet ? "bob" : "alice"));
    // Carol's requests had all begun before.
    CHECK(std::find(after_carol, starts.end(), "carol") == starts.end());
    RequireSameContent(replicas.up.upstream, work / "b2");
  }
}

// --rate with --database is the fleet's (FleetOptions::token_lease): one bucket of 3 packs (a
// token every 100 s after) for both replicas, taken from a token at a time. The warm-up clone
// through a takes one, a pack through b one and one through a: the next through b is refused
// with 429 and a Retry-After within the bucket's 100 s, where the islands (each its own bucket
// of 3) serve it. Each step waits for the replica's lease to be in hand first (its snapshot's
// tokens), so that the order of the leases is the test's.
TEST_CASE("GitMirror.Fleet.TheRateOfAllClonesIsTheFleets") {
  for (const bool fleet : {true, false}) {
    CAPTURE(fleet);
    const GateConfig config{.capacity = 4, .rate = 0.01, .burst = 3};
    TwoReplicas replicas(fleet, config, config);
    ServerUnderTest& a = *replicas.a;
    ServerUnderTest& b = *replicas.b;
    auto tokens = [](const ServerUnderTest& replica) {
      const json state = replica.Debug();  // held: a loop over a temporary's member would not be
      for (const json& t : state["types"]) {
        if (t["name"] == "clone") return t["rate_limit"]["tokens"].get<double>();
      }
      return -1.0;
    };
    auto has_token = [&](const ServerUnderTest& replica) {
      return Eventually([&] { return tokens(replica) >= 1; });
    };
    REQUIRE(has_token(a));
    RequireClone(a.Url("tools.git"), replicas.up.work.path / "warm", "alice");
    const std::string head = Git({"-C", replicas.up.upstream.string(), "rev-parse", "HEAD"});
    REQUIRE(has_token(b));
    CHECK(RawPackRequest(b.port, head, "bob", "b1").status == 200);
    REQUIRE(has_token(a));
    CHECK(RawPackRequest(a.port, head, "carol", "a1").status == 200);
    const RawResponse third = RawPackRequest(b.port, head, "dave", "b2");
    if (!fleet) {
      CHECK(third.status == 200);  // b's own bucket had 3
      continue;
    }
    const int retry_after = CheckRefusedForToken(third);
    MESSAGE("the fleet's fourth pack: 429, Retry-After " << retry_after);
  }
}

// --client-rate with --database is the fleet's too: one client's bucket of 5 (a token every 100 s
// after) for both replicas. Twelve packs of one client, through a and b in turn: as a fleet 5
// are served (a replica takes a token at a time, and one more ahead when it uses its last; a
// request that finds its replica's token used while that lease is on its way waits for it, and
// the requests that follow use any token left waiting on either), the others refused with 429
// and a Retry-After within the bucket's 100 s; as islands (each its own bucket of 5) ten are
// served. Then a second client's five packs through a, and its first through b: as a fleet that
// request waits for b's first lease of the client's bucket (taken when a client's first job
// comes), which brings none, and it is refused as one that found the bucket empty (429, not
// 503); as islands it is served.
TEST_CASE("GitMirror.Fleet.AClientsRateIsTheFleets") {
  for (const bool fleet : {true, false}) {
    CAPTURE(fleet);
    const GateConfig config{.capacity = 4, .client_rate = 0.01, .client_burst = 5};
    TwoReplicas replicas(fleet, config, config);
    // The mirror made by another client, whose bucket is its own (a first clone: 4 requests).
    RequireClone(replicas.a->Url("tools.git"), replicas.up.work.path / "warm", "alice");
    const std::string head = Git({"-C", replicas.up.upstream.string(), "rev-parse", "HEAD"});
    int served = 0;
    for (int i = 0; i < 12; ++i) {
      const ServerUnderTest& replica = i % 2 == 0 ? *replicas.a : *replicas.b;
      const RawResponse response = RawPackRequest(replica.port, head, "bob", std::to_string(i));
      CAPTURE(i);
      if (response.status == 200) {
        ++served;
        continue;
      }
      CheckRefusedForToken(response);
    }
    if (fleet) {
      CHECK(served == 5);
    } else {
      CHECK(served == 10);
    }
    MESSAGE(std::string(fleet ? "fleet" : "islands") << ": " << served << " of 12 packs served");
    for (int i = 0; i < 5; ++i) {
      CHECK(RawPackRequest(replicas.a->port, head, "carol", "a" + std::to_string(i)).status == 200);
    }
    const RawResponse first_on_b = RawPackRequest(replicas.b->port, head, "carol", "b0");
    if (fleet) {
      CheckRefusedForToken(first_on_b);
    } else {
      CHECK(first_on_b.status == 200);
    }
  }
}

TEST_CASE("GitMirror.Fleet.AFetchOnOneReplicaKeepsTheOtherOffThatRepository") {
  for (const bool fleet : {true, false}) {
    CAPTURE(fleet);
    // Replica b repacks after every fetch.
    TwoReplicas replicas(fleet, GateConfig{.capacity = 4}, GateConfig{.capacity = 4},
                         /*repack_after=*/1);
    ServerUnderTest& a = *replicas.a;
    ServerUnderTest& b = *replicas.b;
    const fs::path& work = replicas.up.work.path;
    const fs::path& upstream = replicas.up.upstream;
    RequireClone(a.Url("tools.git"), work / "first", "alice");
    auto notify = [](const ServerUnderTest& replica) {
      return RawHttp(replica.port,
                     "POST /hooks/fetch/tools.git HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Length: 0\r\nConnection: close\r\n\r\n")
          .status;
    };
    auto events = [](const ServerUnderTest& replica, const std::string& event,
                     const std::string& type) {
      int n = 0;
      for (const json& e : replica.Events()) n += e["event"] == event && e["type"] == type;
      return n;
    };
    // A push upstream; replica a's fetch of it is held while it makes its pack.
    std::ofstream(upstream / "pushed.txt") << "pushed\n";
    Git({"-C", upstream.string(), "add", "."});
    Git({"-C", upstream.string(), "commit", "--quiet", "-m", "pushed"});
    PackHold hold(work);
    GlobalPackHold global(hold, work);
    REQUIRE(notify(a) == 202);
    REQUIRE(Eventually([&] { return hold.Held() == 1; }));
    // Replica b is told too (it finds the mirror replica a made) and admits its fetch.
    REQUIRE(notify(b) == 202);
    REQUIRE(Eventually([&] { return b.Debug()["running"] == 1; }));
    if (fleet) {
      // Its fetch waits for a's lease on the repository: it has not begun.
      std::this_thread::sleep_for(500ms);  // a chance for a fleet that did not exclude to begin
      CHECK(events(b, "start", "fetch") == 0);
      CHECK(hold.Held() == 1);
    } else {
      // Islands: b's fetch begins beside a's, on the same mirror.
      CHECK(Eventually([&] { return events(b, "start", "fetch") == 1; }));
    }
    hold.Release();
    REQUIRE(Eventually([&] { return events(a, "end", "fetch") == 1; }));
    REQUIRE(Eventually([&] { return events(b, "end", "fetch") == 1; }));
    // Islands: two gits wrote one mirror at once, and either may have failed.
    if (!fleet) continue;
    // b's fetch brought nothing new but is a fetch all the same: its repack follows.
    REQUIRE(Eventually([&] { return events(b, "end", "repack") == 1; }));
    for (const ServerUnderTest* replica : {&a, &b}) {
      for (const json& e : replica->Events()) {
        if (e["event"] == "end") CHECK(e["status"] == "OK");
      }
    }
    CHECK(Git({"--git-dir", (replicas.shared.path / "mirrors" / "tools.git").string(), "rev-parse",
               "main"}) == Git({"-C", upstream.string(), "rev-parse", "main"}));
  }
}

TEST_CASE("GitMirror.Fleet.BadDatabaseSettingsAreRefused") {
  fairgate::testing::PostgresServer database;
  TempDir dir;
  CHECK(MakeFairgateGate(
            GateConfig{.state_file = (dir.path / "s.db").string(), .database = database.conninfo()})
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(MakeFairgateGate(GateConfig{.replica = "a"}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // A database that cannot be reached: Unavailable, naming the database.
  const std::string nowhere = "host=" + (dir.path / "no-server").string() + " dbname=x";
  const auto refused = MakeFairgateGate(GateConfig{.database = nowhere});
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK(refused.status().message().find("database") != std::string_view::npos);
  CHECK(MakeFifoGate(GateConfig{.database = database.conninfo()}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Two replicas may share a database and each be named; the name is in its leases.
  auto one = MakeFairgateGate(GateConfig{.database = database.conninfo(), .replica = "one"});
  REQUIRE_MESSAGE(one.ok(), one.status().message());
}

}  // namespace fleet_test
}  // namespace
}  // namespace git_mirror
