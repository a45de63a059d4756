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
    set.networks_.emplace_back(address, prefix);
  }
  return set;
}

bool NetworkSet::Contains(asio::ip::address address) const {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return std::any_of(networks_.begin(), networks_.end(), [&](const auto& network) {
    const auto& [base, prefix] = network;
    if (address.is_v4() != base.is_v4()) return false;
    if (address.is_v4()) {
      return asio::ip::make_network_v4(address.to_v4(), prefix).network() ==
             asio::ip::make_network_v4(base.to_v4(), prefix).network();
    }
    return asio::ip::make_network_v6(address.to_v6(), prefix).network() ==
           asio::ip::make_network_v6(base.to_v6(), prefix).network();
  });
}

bool NetworkSet::Contains(std::string_view text) const {
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(std::string(text), error);
  return !error && Contains(address);
}

}  // namespace git_mirror
