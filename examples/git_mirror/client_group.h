// ClientGroups: which group of clients (a tenant, fairgate's group of keys) a client belongs to,
// by a rule given once (--client-group):
// - "prefix:V4/V6": a client named by its address belongs to its address's network, the IPv4
//   /V4 or the IPv6 /V6 ("127.0.5.0/24", "2001:db8:1::/48"), so that one party spreading its
//   clones over the addresses of a network takes one share, not one per address. An
//   IPv4-mapped IPv6 address is the IPv4 address it maps. A client not named by an address (a
//   --client-header value that is not one) belongs to no group: it is a group of its own.
// - "header:NAME": a trusted proxy names the client's group in the header NAME (http_server.h:
//   its last entry, believed only from --trusted-proxy peers), e.g. the organisation of the
//   user it authenticated. The scheduler's key of a client of group G is then "G,client" (KeyOf;
//   a client, an entry of a comma-separated header or an address, never holds a comma), so
//   that one client in two groups is two keys, and the rule reads the group back from the key.
//   A client without the header: its own key, no group.
// - "" (the default): no groups.
// The scheduler asks the rule when it first sees a key (fairgate::RuntimeOptions::key_group).
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
  // [1, 128]; a header's name an HTTP token).
  static fairgate::StatusOr<ClientGroups> Parse(std::string_view spec);

  bool enabled() const { return v4_prefix_ > 0 || !header_.empty(); }
  // "header:NAME": NAME; else "".
  const std::string& header() const { return header_; }
  // The scheduler's key of a request from `client` whose group header said `group` ("" for
  // none): `client`, or "group,client".
  static std::string KeyOf(std::string_view client, std::string_view group);
  // The group of a scheduler's key (a client's address, or KeyOf's), "" for none.
  std::string GroupOf(std::string_view key) const;

 private:
  int v4_prefix_ = 0;  // 0: not by prefix
  int v6_prefix_ = 0;
  std::string header_;  // empty: not by header
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_CLIENT_GROUP_H_
