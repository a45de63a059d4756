#include "client_group.h"

#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "boost/asio/ip/address.hpp"
#include "boost/asio/ip/network_v4.hpp"
#include "boost/asio/ip/network_v6.hpp"

namespace git_mirror {

namespace ip = boost::asio::ip;

fairgate::StatusOr<ClientGroups> ClientGroups::Parse(std::string_view spec) {
  ClientGroups groups;
  if (spec.empty()) return groups;
  const absl::string_view text(spec.data(), spec.size());
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("client group '", text,
                     "' is not \"prefix:V4/V6\" with V4 in [1, 32] and V6 in [1, 128], nor "
                     "\"header:NAME\" with NAME a header's name"));
  };
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "header:")) {
    // RFC 9110's token: the characters a header's name may hold.
    constexpr absl::string_view kTokenPunctuation = "!#$%&'*+-.^_`|~";
    if (rest.empty() || !absl::c_all_of(rest, [&](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                 absl::StrContains(kTokenPunctuation, c);
        })) {
      return bad();
    }
    groups.header_ = std::string(rest);
    return groups;
  }
  if (!absl::ConsumePrefix(&rest, "prefix:")) return bad();
  const std::vector<absl::string_view> lengths = absl::StrSplit(rest, '/');
  if (lengths.size() != 2 || !absl::SimpleAtoi(lengths[0], &groups.v4_prefix_) ||
      !absl::SimpleAtoi(lengths[1], &groups.v6_prefix_) || groups.v4_prefix_ < 1 ||
      groups.v4_prefix_ > 32 || groups.v6_prefix_ < 1 || groups.v6_prefix_ > 128) {
    return bad();
  }
  return groups;
}

std::string ClientGroups::KeyOf(std::string_view client, std::string_view group) {
  if (group.empty()) return std::string(client);
  return absl::StrCat(absl::string_view(group.data(), group.size()), ",",
                      absl::string_view(client.data(), client.size()));
}

std::string ClientGroups::GroupOf(std::string_view key) const {
  if (!header_.empty()) {
    const std::size_t comma = key.find(',');
    return comma == std::string_view::npos ? "" : std::string(key.substr(0, comma));
  }
  if (!enabled()) return "";
  boost::system::error_code error;
  ip::address address = ip::make_address(key, error);
  if (error) return "";
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = ip::make_address_v4(ip::v4_mapped, address.to_v6());
  }
  if (address.is_v4()) {
    return ip::network_v4(address.to_v4(), static_cast<unsigned short>(v4_prefix_))
        .canonical()
        .to_string();
  }
  return ip::network_v6(address.to_v6(), static_cast<unsigned short>(v6_prefix_))
      .canonical()
      .to_string();
}

}  // namespace git_mirror
