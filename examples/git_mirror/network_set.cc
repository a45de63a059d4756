#include "network_set.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/network_v4.hpp"
#include "boost/asio/ip/network_v6.hpp"

namespace git_mirror {

namespace asio = boost::asio;

fairgate::StatusOr<NetworkSet> NetworkSet::Parse(const std::vector<std::string>& networks,
                                                 std::string_view what) {
  NetworkSet set;
  for (const std::string& text : networks) {
    boost::system::error_code error;
    const std::size_t slash = text.find('/');
    const asio::ip::address address = asio::ip::make_address(text.substr(0, slash), error);
    const int max_prefix = address.is_v4() ? 32 : 128;
    int prefix = max_prefix;
    if (error ||
        (slash != std::string::npos && (!absl::SimpleAtoi(text.substr(slash + 1), &prefix) ||
                                        prefix < 0 || prefix > max_prefix))) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what), " '", text, "' is not an address or CIDR network"));
    }
    // An IPv4-mapped network written in IPv6 form (::ffff:127.0.0.1, ::ffff:10.0.0.0/104) is
    // kept as the IPv4 network it maps, so that it matches an IPv4 peer whichever way the
    // listener reports it.
    if (address.is_v6() && address.to_v6().is_v4_mapped() && prefix >= 96) {
      set.networks_.emplace_back(asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()),
                                 prefix - 96);
    } else {
      set.networks_.emplace_back(address, prefix);
    }
  }
  return set;
}

bool NetworkSet::Contains(asio::ip::address address) const {
  auto in = [](const asio::ip::address& a, const std::pair<asio::ip::address, int>& network) {
    const auto& [base, prefix] = network;
    if (a.is_v4() != base.is_v4()) return false;
    if (a.is_v4()) {
      return asio::ip::make_network_v4(a.to_v4(), prefix).network() ==
             asio::ip::make_network_v4(base.to_v4(), prefix).network();
    }
    return asio::ip::make_network_v6(a.to_v6(), prefix).network() ==
           asio::ip::make_network_v6(base.to_v6(), prefix).network();
  };
  // An IPv4 peer on a dual-stack listener arrives IPv4-mapped: it is in an IPv4 network as the
  // address it maps, and in an IPv6 network (::ffff:0:0/96, ::/0) as it came.
  const bool mapped = address.is_v6() && address.to_v6().is_v4_mapped();
  const asio::ip::address v4 =
      mapped ? asio::ip::address(asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()))
             : address;
  return std::any_of(networks_.begin(), networks_.end(), [&](const auto& network) {
    return in(v4, network) || (mapped && in(address, network));
  });
}

bool NetworkSet::Contains(std::string_view text) const {
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(std::string(text), error);
  return !error && Contains(address);
}

}  // namespace git_mirror
