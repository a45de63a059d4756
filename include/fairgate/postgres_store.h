// fairgate/postgres_store.h: the store (fairgate/store.h) in a PostgreSQL database, for several
// processes (replicas) that share what they learned and their durable jobs.
//
// The schema (tables prefixed `fairgate_`) is created on first use and checked on every open:
// a database whose schema is newer than this fairgate's is refused with FailedPrecondition. One
// connection, its calls serialised by a mutex; a call that finds the connection broken (the
// server restarted, the connection was terminated) reconnects once and tries again, so a store
// outlives a database restart; while the server is unreachable calls fail with Unavailable and
// the scheduler goes on in memory. Errors are statuses naming the operation: Unavailable for a
// connection that cannot be made, ResourceExhausted for a full disk, FailedPrecondition for a
// read-only database or a missing privilege, Internal for anything else.
//
// What is not here yet (issue 16): a pool of connections, leases that let replicas claim durable
// jobs fairly, fleet-wide conflicts and caps. Several processes may share one database for
// learned state; durable jobs are each process's own only if their types do not overlap.
//
// Thread safety: every method may be called from any thread at once.
#ifndef FAIRGATE_POSTGRES_STORE_H_
#define FAIRGATE_POSTGRES_STORE_H_

#include <memory>
#include <string>

#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate {

// Connects with the libpq connection string `conninfo` ("host=/run/pg dbname=mirror", or a
// postgresql:// URL) and creates or checks the schema. InvalidArgument for an empty string;
// Unavailable when the server cannot be reached.
StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo);

}  // namespace fairgate

#endif  // FAIRGATE_POSTGRES_STORE_H_
