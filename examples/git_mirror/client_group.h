// ClientGroups: which group of clients (a tenant, fairgate's group of keys) a client belongs to,
// by a rule given once (--client-group):
// - "prefix:V4/V6": a client named by its address belongs to its address's network, the IPv4
//   /V4 or the IPv6 /V6 ("127.0.5.0/24", "2001:db8:1::/48"), so that one party spreading its
//   clones over the addresses of a network takes one share, not one per address. An
//   IPv4-mapped IPv6 address is the IPv4 address it maps. A client not named by an address (a
//   --client-header value that is not one) belongs to no group: it is a group of its own.
// - "" (the default): no groups.
// The scheduler asks the rule when it first sees a client (fairgate::RuntimeOptions::key_group).
//
// Thread safety: const after Parse.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_CLIENT_GROUP_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_CLIENT_GROUP_H_

#include <string>
#include <string_view>

#include "fairgate/status.h"

namespace git_mirror {

class ClientGroups {
 public:
  ClientGroups() = default;  // no groups
  // InvalidArgument saying what is wrong with `spec` (the prefixes must be in [1, 32] and
  // [1, 128]).
  static fairgate::StatusOr<ClientGroups> Parse(std::string_view spec);

  bool enabled() const { return v4_prefix_ > 0; }
  // The client's group, "" for none.
  std::string GroupOf(std::string_view client) const;

 private:
  int v4_prefix_ = 0;  // 0: no groups
  int v6_prefix_ = 0;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_CLIENT_GROUP_H_
