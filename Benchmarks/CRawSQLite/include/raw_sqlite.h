// The raw side of la-bench's keychain comparison: the keychain's table and connection settings through the SQLite C
// API with statements prepared once, no crypto, no wrapper. Every function returns an SQLite result code
// (SQLITE_OK, or SQLITE_DONE / SQLITE_ROW where a step says so).
#ifndef RAW_SQLITE_H
#define RAW_SQLITE_H

#include <stddef.h>
#include <stdint.h>

typedef struct raw_sqlite raw_sqlite;

/// Opens (creating) `path` in WAL mode with synchronous=FULL and secure_delete=ON, creates the keychain's table
/// and indexes, and prepares the statements. Rows get blobs of the given sizes: attributes, wrapped key and value.
int raw_sqlite_open(const char *path, size_t attributes_size, size_t wrapped_key_size, size_t value_size,
                    raw_sqlite **out);

/// Inserts row `index` (its own autocommit transaction, as one SecItemAdd is one transaction).
int raw_sqlite_insert(raw_sqlite *db, int64_t index);

/// Looks up row `index` by its 32-byte blind index and copies its value into the handle's buffer;
/// SQLITE_ROW when found, SQLITE_DONE when not.
int raw_sqlite_find(raw_sqlite *db, int64_t index);

/// Replaces row `index`'s value (one UPDATE by blind index).
int raw_sqlite_update(raw_sqlite *db, int64_t index);

/// Deletes row `index` (one DELETE by blind index).
int raw_sqlite_delete(raw_sqlite *db, int64_t index);

/// The bytes of the value the last find copied.
size_t raw_sqlite_found_size(const raw_sqlite *db);

void raw_sqlite_close(raw_sqlite *db);

/// The blob sizes of the first row of `item` in the database at `path` (opened read-only): so the raw side stores
/// rows of the engine's sizes.
int raw_sqlite_row_sizes(const char *path, size_t *attributes_size, size_t *wrapped_key_size, size_t *value_size);

/// The median of `iterations` round trips (after 200 unmeasured) between this process and a forked peer over a
/// Unix stream socket: `request_size` bytes out, `answer_size` bytes back, each side blocked in read() while it
/// waits, or, when `spinning` is nonzero, polling with non-blocking reads and sched_yield() between them (no
/// wake-up: the physical floor). Nanoseconds, or -1 when the peer cannot be started.
double raw_unix_round_trip_ns(int iterations, int request_size, int answer_size, int spinning);

/// Under callgrind, turns the collection of events on or off (la-bench counts only the timed loop); elsewhere,
/// and where valgrind's header is missing, does nothing.
void raw_callgrind_toggle_collect(void);

#endif
