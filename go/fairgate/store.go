package fairgate

/*
#include <stdlib.h>
#include "fairgate/c.h"
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"
)

// A Store keeps what survives a restart (fairgate/store.h): durable jobs, learned costs and
// keys' accumulated costs. Open one with OpenSQLite (one process) or OpenPostgres (replicas
// sharing a database), give it to New in Options.Store, and Close it when no longer needed: a
// Scheduler made with it keeps the store open until the Scheduler is closed, so the Store may be
// closed as soon as New returns.
type Store struct {
	mu sync.Mutex
	c  *C.fairgate_store // nil once closed
}

// SQLiteOptions configure OpenSQLite. Zero fields take fairgate's defaults.
type SQLiteOptions struct {
	// SyncNormal syncs the log only at checkpoints: an acknowledged job survives the process's
	// crash but possibly not the machine's. By default every commit waits for an fsync.
	SyncNormal bool
	// BusyTimeout is how long a write waits for another process's lock on the file. 0: 5 s.
	BusyTimeout time.Duration
	// MaxJobBytes bounds a durable job's type, id, key and payload together. 0: about 1 GB.
	MaxJobBytes int
}

// OpenSQLite opens, creating it if absent, the store in the SQLite file at path.
func OpenSQLite(path string, options SQLiteOptions) (*Store, error) {
	var c C.fairgate_sqlite_options
	C.fairgate_sqlite_options_init_version(&c, C.FAIRGATE_SQLITE_OPTIONS_VERSION)
	if options.SyncNormal {
		c.synchronous = C.FAIRGATE_SQLITE_SYNC_NORMAL
	}
	if options.BusyTimeout != 0 {
		c.busy_timeout_seconds = C.double(options.BusyTimeout.Seconds())
	}
	if options.MaxJobBytes != 0 {
		c.max_job_bytes = C.size_t(options.MaxJobBytes)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var code C.fairgate_code
	var message *C.char
	store := C.fairgate_sqlite_store_open(cpath, &c, &code, &message)
	if store == nil {
		return nil, errorOf(code, message)
	}
	return &Store{c: store}, nil
}

// PostgresOptions configure OpenPostgres. Zero fields take fairgate's defaults.
type PostgresOptions struct {
	// Replica is this replica's name in the leases it holds, unique among the running replicas.
	// "": one made from the host name, the process id and a random part.
	Replica string
	// Connections is how many connections to the server it keeps at most. 0: 4.
	Connections int
	// MaxJobBytes bounds a durable job's type, id, key and payload together. 0: 500 MB.
	MaxJobBytes int
}

// OpenPostgres connects with the libpq connection string conninfo ("host=/run/pg dbname=mirror",
// or a postgresql:// URL) and creates, migrates or checks fairgate's tables: the store of one
// replica, each replica opening its own on the same database.
func OpenPostgres(conninfo string, options PostgresOptions) (*Store, error) {
	var c C.fairgate_postgres_options
	C.fairgate_postgres_options_init_version(&c, C.FAIRGATE_POSTGRES_OPTIONS_VERSION)
	var mem cMemory
	defer mem.free()
	if options.Replica != "" {
		c.replica = mem.string(options.Replica)
	}
	if options.Connections != 0 {
		c.connections = C.int(options.Connections)
	}
	if options.MaxJobBytes != 0 {
		c.max_job_bytes = C.size_t(options.MaxJobBytes)
	}
	var code C.fairgate_code
	var message *C.char
	store := C.fairgate_postgres_store_open(mem.string(conninfo), &c, &code, &message)
	if store == nil {
		return nil, errorOf(code, message)
	}
	return &Store{c: store}, nil
}

// Close lets the store go: it closes now unless a Scheduler still holds it. Calling it again
// does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	C.fairgate_store_free(s.c)
	s.c = nil
	return nil
}
