#include "request_body.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace git_mirror {

fairgate::StatusOr<std::string> InflateGzip(std::string_view compressed, std::size_t limit,
                                            const std::function<bool(std::size_t)>& may_hold) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {  // 16: gzip framing only
    return absl::InternalError("zlib could not start");
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char chunk[65536];
  int result = Z_OK;
  while (result != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    result = inflate(&z, Z_NO_FLUSH);
    if (result != Z_OK && result != Z_STREAM_END) {
      inflateEnd(&z);
      return absl::InvalidArgumentError("the request body is not valid gzip");
    }
    const std::size_t produced = sizeof chunk - z.avail_out;
    if (out.size() + produced > limit) {
      inflateEnd(&z);
      return absl::ResourceExhaustedError(
          absl::StrCat("the request body inflates past the limit of ", limit, " bytes"));
    }
    if (out.size() + produced > out.capacity()) {
      const std::size_t grown =
          std::min(limit, std::max(out.size() + produced, 2 * out.capacity()));
      if (may_hold && !may_hold(grown)) {
        inflateEnd(&z);
        return absl::UnavailableError(
            "the server holds as many request bodies as its memory budget allows");
      }
      out.reserve(grown);
    }
    out.append(chunk, produced);
    if (result == Z_OK && produced == 0 && z.avail_in == 0) {
      inflateEnd(&z);
      return absl::InvalidArgumentError("the gzip request body is truncated");
    }
  }
  inflateEnd(&z);
  return out;
}

fairgate::Status ValidatePktLines(std::string_view body) {
  bool flushed = false;
  std::size_t at = 0;
  while (at < body.size()) {
    if (body.size() - at < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed request: a truncated pkt-line at byte ", at));
    }
    std::uint32_t length = 0;
    const std::string_view digits = body.substr(at, 4);
    if (digits.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos ||
        !absl::SimpleHexAtoi(absl::string_view(digits.data(), digits.size()), &length)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed request: no pkt-line length at byte ", at));
    }
    if (length <= 2) {  // flush, delimiter, response end
      flushed |= length == 0;
      at += 4;
      continue;
    }
    if (length == 3 || length > body.size() - at) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed request: a pkt-line length of ", length, " at byte ", at));
    }
    at += length;
  }
  if (!flushed) return absl::InvalidArgumentError("malformed request: no flush packet");
  return absl::OkStatus();
}

bool IsRefListing(std::string_view body) {
  constexpr std::string_view kCommand = "command=ls-refs";
  return body.size() >= 4 + kCommand.size() && body.substr(4, kCommand.size()) == kCommand;
}

}  // namespace git_mirror
