// What the documentation's C++ fragments leave to their reader, declared so that each compiles
// as written (snippets.cmake puts this first in every extracted block): a request handler's
// client, the work a job does, and an Asio strand. Only compiled, never run.
#ifndef FAIRGATE_SNIPPET_PRELUDE_H_
#define FAIRGATE_SNIPPET_PRELUDE_H_

#include <string>
#include <string_view>
#include <utility>  // before Boost.Asio's headers, for Boost 1.74 in C++20 (fairgate/asio.h)

#include "boost/asio/io_context.hpp"
#include "boost/asio/strand.hpp"
#include "fairgate/asio.h"
#include "fairgate/scheduler.h"

using fairgate::FairnessKey, fairgate::JobId, fairgate::TypeName;

inline const std::string client_address = "192.0.2.7";  // the peer of the request being served
inline const std::string client = client_address;
inline boost::asio::io_context io;
inline auto strand = boost::asio::make_strand(io);

fairgate::Status ServeClone(const fairgate::Context& ctx);
fairgate::Status Repack(const fairgate::Context& ctx);
fairgate::Status Fetch(std::string_view repository, std::string_view refs,
                       const fairgate::Context& ctx);
void StartStreaming(fairgate::Permit permit);

#endif  // FAIRGATE_SNIPPET_PRELUDE_H_
