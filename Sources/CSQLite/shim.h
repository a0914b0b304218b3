// The parts of SQLite 3 that Swift cannot import directly (macros that cast),
// wrapped as static inline functions. Nothing else.
#ifndef COUNTDOWN_SQLITE_SHIM_H
#define COUNTDOWN_SQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT casts -1 to a function pointer: it tells SQLite to copy a
/// bound text or blob before the bind call returns, so Swift's buffer may go.
static inline sqlite3_destructor_type cds_sqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
