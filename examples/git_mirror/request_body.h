// What a git smart-HTTP request body may be: inflating a gzip body within a limit, and checking
// that a body is a well-formed sequence of pkt-lines before git sees it (so that a malformed
// request is the client's error, 400, and not git's failure).
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_REQUEST_BODY_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_REQUEST_BODY_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "fairgate/status.h"

namespace git_mirror {

// The inflated body. InvalidArgument when it is not gzip; ResourceExhausted when it would
// inflate past `limit` bytes (it stops there: memory stays bounded by the limit). Before its
// output's storage grows, `may_hold` (if set) is asked whether it may hold that many bytes; a
// refusal stops it with Unavailable. The storage grows by doubling, so it holds at most twice
// what it inflated, and one copy of it.
fairgate::StatusOr<std::string> InflateGzip(
    std::string_view compressed, std::size_t limit,
    const std::function<bool(std::size_t bytes)>& may_hold = nullptr);

// OK when `body` is one or more pkt-lines (4 hex digits of length including themselves, or a
// 0000 flush, 0001 delimiter, 0002 response-end packet) that end exactly at its end, with at least
// one flush; else InvalidArgument saying what is wrong.
fairgate::Status ValidatePktLines(std::string_view body);

// Whether a protocol v2 request asks only for the ref listing (`command=ls-refs`).
bool IsRefListing(std::string_view body);

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_REQUEST_BODY_H_
