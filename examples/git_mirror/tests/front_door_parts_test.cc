// The front door's parts on their own, without sockets: the rate floor's bucket, the body budget
// and its leases, and network lists.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "body_budget.h"
#include "boost/asio/io_context.hpp"
#include "client_group.h"
#include "doctest/doctest.h"
#include "mirror_test_util.h"
#include "network_set.h"
#include "pack_cache.h"
#include "rate_floor.h"
#include "request_body.h"
#include "spool.h"

namespace git_mirror {
namespace {
namespace front_door_parts_test {

using namespace std::chrono_literals;
using Clock = RateFloor::Clock;

TEST_CASE("RateFloor.ATransferAtTheRateIsNeverCutAndOneThatStopsIsCutAfterTheGrace") {
  const Clock::time_point t0{};
  RateFloor floor(1000, 2s);  // 1,000 B/s, 2 s of grace: a bucket of 2,000 bytes
  floor.Start(t0);
  CHECK(floor.Left(t0) == 2s);
  // At exactly the rate for a minute, in steps of 100 ms: the bucket stays full.
  std::uint64_t moved = 0;
  for (int step = 1; step <= 600; ++step) {
    moved += 100;
    floor.Moved(moved, t0 + step * 100ms);
    REQUIRE(floor.Left(t0 + step * 100ms) == 2s);
  }
  // Then nothing: cut two seconds later, not before.
  const Clock::time_point stopped = t0 + 60s;
  CHECK(floor.Left(stopped + 1999ms) > Clock::duration::zero());
  CHECK(floor.Left(stopped + 2s) == Clock::duration::zero());
}

TEST_CASE("RateFloor.AFastStartBuysNoMoreThanTheGraceAndATrickleIsCut") {
  const Clock::time_point t0{};
  RateFloor fast(1000, 2s);
  fast.Start(t0);
  fast.Moved(1'000'000, t0 + 1s);   // a megabyte at once
  CHECK(fast.Left(t0 + 1s) == 2s);  // credit capped at the bucket
  RateFloor trickle(1000, 2s);
  trickle.Start(t0);
  for (int second = 1; second <= 3; ++second) trickle.Moved(100 * second, t0 + second * 1s);
  // 100 B/s against 1,000: 900 B/s lost from 2,000 B: empty after 2.22 s.
  CHECK(trickle.Left(t0 + 3s) == Clock::duration::zero());
}

TEST_CASE("RateFloor.TimeWhileStoppedIsNotHeldAgainstTheTransfer") {
  const Clock::time_point t0{};
  RateFloor floor(1000, 2s);
  floor.Start(t0);
  floor.Stop(t0 + 1s);  // 1,000 bytes of credit left
  CHECK_FALSE(floor.running());
  floor.Start(t0 + 1h);  // the server made its next piece for an hour
  CHECK(floor.Left(t0 + 1h) == 1s);
  floor.Moved(500, t0 + 1h + 500ms);
  CHECK(floor.Left(t0 + 1h + 500ms) == 1s);
}

TEST_CASE("BodyBudget.LeasesGrowWithinTheLimitAndGiveBackWhenDropped") {
  auto budget = std::make_shared<BodyBudget>(100);
  BodyLease a(budget), b(budget);
  CHECK(a.Resize(60));
  CHECK_FALSE(b.Resize(41));  // would pass 100: nothing counted
  CHECK(b.bytes() == 0);
  CHECK(budget->held() == 60);
  CHECK(b.Resize(40));
  CHECK(a.Resize(10));  // shrinking gives back
  CHECK(budget->held() == 50);
  {
    RequestBody moved{"x", std::move(b)};  // carried along, still counted
    CHECK(budget->held() == 50);
  }
  CHECK(budget->held() == 10);
  a = BodyLease(budget);  // replaced: what it held is given back
  CHECK(budget->held() == 0);
}

TEST_CASE("BodyBudget.InflatingAsksBeforeItsStorageGrows") {
  const std::string text(100'000, 'a');
  const std::string packed = testing::Gzip(text);
  std::size_t largest = 0;
  auto whole = InflateGzip(packed, 1 << 20, [&](std::size_t bytes) {
    largest = std::max(largest, bytes);
    return true;
  });
  REQUIRE(whole.ok());
  CHECK(*whole == text);
  CHECK(largest >= text.size());
  CHECK(whole->capacity() <= largest + 16);  // it holds what it asked for
  auto refused = InflateGzip(packed, 1 << 20, [](std::size_t bytes) { return bytes < 50'000; });
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
}

// Runs what the spool posted for its readers and writer.
int RunPosted(boost::asio::io_context& io) {
  io.restart();
  return static_cast<int>(io.poll());
}

TEST_CASE("Spool.ReadersReadWhatWasWrittenAndAreWokenForMore") {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto budget = std::make_shared<SpoolBudget>(1 << 20);
  auto spool = Spool::Create(dir.path.string(), budget).value();
  int woken = 0;
  const auto reader = spool->Join(io.get_executor(), [&] { ++woken; }).value();
  spool->WaitForMore(reader);
  REQUIRE(spool->Append("hello ", 6).value());
  CHECK(RunPosted(io) == 1);
  CHECK(woken == 1);
  REQUIRE(spool->Append("world", 5).value());
  CHECK(RunPosted(io) == 0);  // it did not ask
  char text[16] = {};
  CHECK(spool->ReadAt(0, text, sizeof text).value() == 11);
  CHECK(std::string(text, 11) == "hello world");
  CHECK(spool->ReadAt(6, text, 3).value() == 3);
  CHECK(spool->ReadAt(11, text, 3).value() == 0);
  spool->WaitForMore(reader);
  spool->End(absl::OkStatus());
  CHECK(RunPosted(io) == 1);
  CHECK(spool->view().ended);
  CHECK(spool->view().size == 11);
  // The file is already unlinked: nothing in the directory.
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("Spool.AnOpenSpoolKeepsItsStartForJoinersUntilTheBudgetIsShort") {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto budget = std::make_shared<SpoolBudget>(100);
  auto spool = Spool::Create(dir.path.string(), budget).value();
  const std::string piece(40, 'x');
  const auto first = spool->Join(io.get_executor(), [] {}).value();
  REQUIRE(spool->Append(piece.data(), piece.size()).value());
  REQUIRE(spool->Append(piece.data(), piece.size()).value());
  spool->Sent(first, 80);
  CHECK(budget->held() == 80);  // open to joiners: a joiner starts at byte 0
  const auto second = spool->Join(io.get_executor(), [] {});
  REQUIRE(second.has_value());
  // No room for a third piece: the spool closes to joiners and gives back what every reader has
  // taken (the second has taken nothing yet), then still has no room.
  CHECK_FALSE(spool->Append(piece.data(), piece.size()).value());
  CHECK_FALSE(spool->open_to_joiners());
  CHECK_FALSE(spool->Join(io.get_executor(), [] {}).has_value());
  spool->Sent(*second, 80);  // now both have taken 80: given back
  CHECK(budget->held() == 0);
  CHECK(spool->Append(piece.data(), piece.size()).value());
  CHECK(budget->held() == 40);
  spool.reset();  // dropped: everything given back
  CHECK(budget->held() == 0);
}

TEST_CASE("Spool.ASpoolWhoseLastReaderLeavesBeforeItsEndIsAbandoned") {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto budget = std::make_shared<SpoolBudget>(1 << 20);
  for (const bool ended_first : {false, true}) {
    CAPTURE(ended_first);
    auto spool = Spool::Create(dir.path.string(), budget).value();
    bool abandoned = false;
    spool->OnAbandoned(io.get_executor(), [&] { abandoned = true; });
    const auto a = spool->Join(io.get_executor(), [] {}).value();
    const auto b = spool->Join(io.get_executor(), [] {}).value();
    spool->Leave(a);
    RunPosted(io);
    CHECK_FALSE(abandoned);  // b still reads
    if (ended_first) spool->End(absl::OkStatus());
    spool->Leave(b);
    RunPosted(io);
    CHECK(abandoned == !ended_first);
  }
}

TEST_CASE("PackCache.KeepsTheMostRecentlyUsedWithinItsLimitAndDropsARepository") {
  testing::TempDir dir;
  auto budget = std::make_shared<SpoolBudget>(1 << 20);
  auto spool = [&] { return Spool::Create(dir.path.string(), budget).value(); };
  PackCache cache(100, 3);
  const auto a = spool(), b = spool(), c = spool();
  cache.Put("a", "one.git", a, 40);
  cache.Put("b", "one.git", b, 40);
  CHECK(cache.Get("a") == a);        // a is now the most recently used
  cache.Put("c", "two.git", c, 40);  // 120 > 100: b goes
  CHECK(cache.Get("b") == nullptr);
  CHECK(cache.Get("a") == a);
  CHECK(cache.Get("c") == c);
  CHECK(cache.bytes() == 80);
  CHECK(cache.hits() == 3);
  cache.Put("big", "two.git", spool(), 101);  // larger than the whole cache: not kept
  CHECK(cache.Get("big") == nullptr);
  CHECK(cache.Get("c") == c);
  cache.DropRepository("one.git");
  CHECK(cache.Get("a") == nullptr);
  CHECK(cache.bytes() == 40);
  // At most three entries (descriptors), whatever their bytes: the least recently used goes.
  PackCache few(1000, 3);
  for (const std::string key : {"1", "2", "3", "4"}) few.Put(key, "r.git", spool(), 1);
  CHECK(few.Get("1") == nullptr);
  CHECK(few.Get("4") != nullptr);
  CHECK(few.bytes() == 3);
}

TEST_CASE("Spool.AWholeSpoolThatEndedWellCanBeReadAgainFromTheStart") {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto budget = std::make_shared<SpoolBudget>(8 << 20);
  const std::string megabyte(1 << 20, 'p');
  for (const std::uint64_t keep : {std::uint64_t{4} << 20, std::uint64_t{1} << 20}) {
    CAPTURE(keep);
    auto spool = Spool::Create(dir.path.string(), budget).value();
    spool->KeepWhole(keep);
    const auto reader = spool->Join(io.get_executor(), [] {}).value();
    for (int i = 0; i < 2; ++i) REQUIRE(spool->Append(megabyte.data(), megabyte.size()).value());
    spool->End(absl::OkStatus());
    spool->Sent(reader, 2 << 20);
    spool->Leave(reader);
    // Kept whole (2 MiB within 4): joined after its end, from byte 0. Past the limit: holes were
    // punched, and it cannot be.
    const bool whole = keep >= (std::uint64_t{2} << 20);
    CHECK(spool->whole() == whole);
    // Kept whole, its bytes stay counted in the spool budget until a cache takes it.
    CHECK(budget->held() == (whole ? std::uint64_t{2} << 20 : 0));
    if (whole) spool->HandOver();
    CHECK(budget->held() == 0);
    CHECK(spool->Join(io.get_executor(), [] {}).has_value() == whole);
    if (whole) {
      char first = 0;
      CHECK(spool->ReadAt(0, &first, 1).value() == 1);
      CHECK(first == 'p');
    }
  }
}

TEST_CASE("Spool.ASpoolKeptWholeStopsKeepingWhenTheBudgetRunsShort") {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto budget = std::make_shared<SpoolBudget>(100);
  auto spool = Spool::Create(dir.path.string(), budget).value();
  spool->KeepWhole(1000);
  const auto reader = spool->Join(io.get_executor(), [] {}).value();
  const std::string piece(40, 'x');
  REQUIRE(spool->Append(piece.data(), piece.size()).value());
  REQUIRE(spool->Append(piece.data(), piece.size()).value());
  spool->Sent(reader, 80);
  CHECK(budget->held() == 80);  // kept
  // The third piece finds no room: the spool stops keeping (and closes to joiners), gives back
  // what was sent, and the piece goes in. It will not be cached.
  CHECK(spool->Append(piece.data(), piece.size()).value());
  CHECK(budget->held() == 40);
  spool->End(absl::OkStatus());
  CHECK_FALSE(spool->whole());
}

TEST_CASE("NetworkSet.MatchesAddressesAndNetworksOfBothFamilies") {
  auto set = NetworkSet::Parse({"127.0.0.0/8", "::1", "2001:db8::/32", "192.0.2.7"}, "network");
  REQUIRE(set.ok());
  CHECK(set->Contains("127.1.2.3"));
  CHECK(set->Contains("::ffff:127.0.0.1"));  // IPv4-mapped: matched as IPv4
  CHECK(set->Contains("::1"));
  CHECK(set->Contains("2001:db8:1::5"));
  CHECK(set->Contains("192.0.2.7"));
  CHECK_FALSE(set->Contains("192.0.2.8"));
  CHECK_FALSE(set->Contains("2001:db9::1"));
  CHECK_FALSE(set->Contains("alice"));
  CHECK_FALSE(NetworkSet().Contains("127.0.0.1"));
  // A network written IPv4-mapped matches the IPv4 peer in both of its forms, and an IPv6 network
  // that covers the mapped range matches a mapped peer.
  auto mapped = NetworkSet::Parse({"::ffff:127.0.0.1", "::ffff:10.0.0.0/104"}, "network");
  REQUIRE(mapped.ok());
  CHECK(mapped->Contains("127.0.0.1"));
  CHECK(mapped->Contains("::ffff:127.0.0.1"));
  CHECK(mapped->Contains("10.200.0.1"));
  CHECK_FALSE(mapped->Contains("11.0.0.1"));
  CHECK_FALSE(mapped->Contains("::1"));
  auto all_v6 = NetworkSet::Parse({"::/0"}, "network");
  REQUIRE(all_v6.ok());
  CHECK(all_v6->Contains("::ffff:192.0.2.1"));
  CHECK(all_v6->Contains("2001:db8::1"));
  CHECK_FALSE(all_v6->Contains("192.0.2.1"));  // an IPv4 peer on an IPv4 listener is not IPv6
  for (const std::string bad : {"10.0.0.0/33", "::/129", "10.0.0.0/x", "host.example", ""}) {
    CAPTURE(bad);
    const auto parsed = NetworkSet::Parse({bad}, "trusted proxy");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().message() ==
          "trusted proxy '" + bad + "' is not an address or CIDR network");
  }
}

TEST_CASE("ClientGroups.AnAddressBelongsToItsNetworkAndANameToNoGroup") {
  auto groups = ClientGroups::Parse("prefix:24/48");
  REQUIRE(groups.ok());
  CHECK(groups->GroupOf("127.0.5.17") == "127.0.5.0/24");
  CHECK(groups->GroupOf("127.0.5.254") == "127.0.5.0/24");
  CHECK(groups->GroupOf("127.0.6.1") == "127.0.6.0/24");
  CHECK(groups->GroupOf("::ffff:127.0.5.3") == "127.0.5.0/24");  // IPv4-mapped: as IPv4
  CHECK(groups->GroupOf("2001:db8:1:2::5") == "2001:db8:1::/48");
  CHECK(groups->GroupOf("alice").empty());  // a header's name, not an address: no group
  CHECK(groups->GroupOf("").empty());       // maintenance
  CHECK_FALSE(ClientGroups().enabled());
  CHECK(ClientGroups().GroupOf("127.0.0.1").empty());
  for (const std::string bad :
       {"prefix:33/48", "prefix:24/129", "prefix:0/48", "prefix:24", "header:", "header:X Org",
        "header:X-Org,Y", "header:X:Y", "24/48", "prefix:a/b"}) {
    CAPTURE(bad);
    const auto parsed = ClientGroups::Parse(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(std::string(parsed.status().message()).find("client group '" + bad + "'") !=
          std::string::npos);
  }
}

TEST_CASE("ClientGroups.AProxysHeaderNamesTheGroupOfAKeyThatCarriesIt") {
  auto groups = ClientGroups::Parse("header:X-Tenant");
  REQUIRE(groups.ok());
  CHECK(groups->enabled());
  CHECK(groups->header() == "X-Tenant");
  CHECK(ClientGroups::KeyOf("192.0.2.7", "acme") == "acme,192.0.2.7");
  CHECK(ClientGroups::KeyOf("192.0.2.7", "") == "192.0.2.7");
  CHECK(groups->GroupOf("acme,192.0.2.7") == "acme");
  CHECK(groups->GroupOf("acme,alice") == "acme");
  // One client in two groups is two keys, each in its own group.
  CHECK(groups->GroupOf(ClientGroups::KeyOf("alice", "globex")) == "globex");
  // A client the proxy named no group for, and maintenance: no group. By header, an address is
  // not grouped by its network.
  CHECK(groups->GroupOf("192.0.2.7").empty());
  CHECK(groups->GroupOf("").empty());
  CHECK(ClientGroups::Parse("prefix:24/48")->header().empty());
}

}  // namespace front_door_parts_test
}  // namespace
}  // namespace git_mirror
