// NetworkSet: a list of IP networks, each an address or a CIDR network, IPv4 or IPv6, and the
// question whether an address is in one of them. An IPv4-mapped IPv6 address (what a dual-stack
// socket reports for an IPv4 peer) is matched as the IPv4 address it maps, and against IPv6
// networks as it is; a network written IPv4-mapped is kept as the IPv4 network it maps.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_NETWORK_SET_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_NETWORK_SET_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boost/asio/ip/address.hpp"
#include "fairgate/status.h"

namespace git_mirror {

class NetworkSet {
 public:
  NetworkSet() = default;  // empty: contains nothing

  // InvalidArgument naming the first entry that is neither an address nor a CIDR network, as
  // "<what> '<entry>' is not ...".
  static fairgate::StatusOr<NetworkSet> Parse(const std::vector<std::string>& networks,
                                              std::string_view what);

  bool Contains(boost::asio::ip::address address) const;
  // False for text that is not an IP address.
  bool Contains(std::string_view address) const;

 private:
  std::vector<std::pair<boost::asio::ip::address, int>> networks_;  // address, prefix length
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_NETWORK_SET_H_
