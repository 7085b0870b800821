#include "raw_sqlite.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif

struct raw_sqlite {
    sqlite3 *db;
    sqlite3_stmt *insert, *find, *update, *delete_;
    size_t attributes_size, wrapped_key_size, value_size;
    unsigned char *filler;
    unsigned char found[4096];
    size_t found_size;
};

/// A 32-byte key that stands in for the HMAC blind index: the row's number spread over the bytes.
static void blind_index(int64_t index, unsigned char out[32]) {
    uint64_t x = (uint64_t)index * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 32; i++) {
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ull;
        out[i] = (unsigned char)(x >> 56);
    }
}

static int exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL); }

int raw_sqlite_open(const char *path, size_t attributes_size, size_t wrapped_key_size, size_t value_size,
                    raw_sqlite **out) {
    raw_sqlite *r = calloc(1, sizeof *r);
    if (!r) return SQLITE_NOMEM;
    r->attributes_size = attributes_size;
    r->wrapped_key_size = wrapped_key_size;
    r->value_size = value_size;
    size_t largest = attributes_size > value_size ? attributes_size : value_size;
    largest = largest > wrapped_key_size ? largest : wrapped_key_size;
    r->filler = malloc(largest ? largest : 1);
    if (!r->filler) {
        free(r);
        return SQLITE_NOMEM;
    }
    for (size_t i = 0; i < largest; i++) r->filler[i] = (unsigned char)(i * 131 + 7);
    int rc = sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(r->db, 60000);
    if (rc == SQLITE_OK) rc = exec(r->db, "PRAGMA journal_mode = WAL");
    if (rc == SQLITE_OK) rc = exec(r->db, "PRAGMA secure_delete = ON");
    if (rc == SQLITE_OK) rc = exec(r->db, "PRAGMA synchronous = FULL");
    if (rc == SQLITE_OK)
        rc = exec(r->db,
                  "CREATE TABLE IF NOT EXISTS item ("
                  " id INTEGER PRIMARY KEY AUTOINCREMENT, class TEXT NOT NULL, agrp TEXT NOT NULL,"
                  " pdmn TEXT NOT NULL, sync INTEGER NOT NULL, blind_index BLOB NOT NULL UNIQUE,"
                  " attributes BLOB NOT NULL, wrapped_key BLOB NOT NULL, value BLOB NOT NULL, acl INTEGER, gen INTEGER);"
                  "CREATE INDEX IF NOT EXISTS item_by_class ON item(class, agrp, sync);"
                  "CREATE INDEX IF NOT EXISTS item_legacy ON item(id) WHERE gen IS NULL;");
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v3(r->db,
                                "INSERT INTO item (class, agrp, pdmn, sync, blind_index, attributes, wrapped_key,"
                                " value, acl, gen) VALUES ('genp', 'bench', 'ak', 0, ?, ?, ?, ?, 0, 1)",
                                -1, SQLITE_PREPARE_PERSISTENT, &r->insert, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v3(r->db,
                                "SELECT id, class, agrp, pdmn, sync, blind_index, attributes, wrapped_key, acl, gen,"
                                " value FROM item WHERE blind_index = ?",
                                -1, SQLITE_PREPARE_PERSISTENT, &r->find, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v3(r->db, "UPDATE item SET value = ?, gen = gen + 1 WHERE blind_index = ?", -1,
                                SQLITE_PREPARE_PERSISTENT, &r->update, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v3(r->db, "DELETE FROM item WHERE blind_index = ?", -1, SQLITE_PREPARE_PERSISTENT,
                                &r->delete_, NULL);
    if (rc != SQLITE_OK) {
        raw_sqlite_close(r);
        return rc;
    }
    *out = r;
    return SQLITE_OK;
}

/// Steps a statement once and resets it; the step's result.
static int step_once(sqlite3_stmt *statement) {
    int rc = sqlite3_step(statement);
    sqlite3_reset(statement);
    return rc;
}

int raw_sqlite_insert(raw_sqlite *r, int64_t index) {
    unsigned char key[32];
    blind_index(index, key);
    sqlite3_bind_blob(r->insert, 1, key, 32, SQLITE_STATIC);
    sqlite3_bind_blob(r->insert, 2, r->filler, (int)r->attributes_size, SQLITE_STATIC);
    sqlite3_bind_blob(r->insert, 3, r->filler, (int)r->wrapped_key_size, SQLITE_STATIC);
    sqlite3_bind_blob(r->insert, 4, r->filler, (int)r->value_size, SQLITE_STATIC);
    return step_once(r->insert);
}

int raw_sqlite_find(raw_sqlite *r, int64_t index) {
    unsigned char key[32];
    blind_index(index, key);
    sqlite3_bind_blob(r->find, 1, key, 32, SQLITE_STATIC);
    int rc = sqlite3_step(r->find);
    if (rc == SQLITE_ROW) {
        // Read every column a lookup reads, and copy the value out as a caller would.
        volatile int64_t id = sqlite3_column_int64(r->find, 0);
        (void)id;
        for (int column = 1; column < 10; column++) (void)sqlite3_column_blob(r->find, column);
        int size = sqlite3_column_bytes(r->find, 10);
        const void *value = sqlite3_column_blob(r->find, 10);
        r->found_size = size > 0 && (size_t)size <= sizeof r->found ? (size_t)size : 0;
        if (r->found_size) memcpy(r->found, value, r->found_size);
    }
    sqlite3_reset(r->find);
    return rc;
}

int raw_sqlite_update(raw_sqlite *r, int64_t index) {
    unsigned char key[32];
    blind_index(index, key);
    sqlite3_bind_blob(r->update, 1, r->filler, (int)r->value_size, SQLITE_STATIC);
    sqlite3_bind_blob(r->update, 2, key, 32, SQLITE_STATIC);
    int rc = step_once(r->update);
    return rc == SQLITE_DONE && sqlite3_changes(r->db) != 1 ? SQLITE_NOTFOUND : rc;
}

int raw_sqlite_delete(raw_sqlite *r, int64_t index) {
    unsigned char key[32];
    blind_index(index, key);
    sqlite3_bind_blob(r->delete_, 1, key, 32, SQLITE_STATIC);
    int rc = step_once(r->delete_);
    return rc == SQLITE_DONE && sqlite3_changes(r->db) != 1 ? SQLITE_NOTFOUND : rc;
}

size_t raw_sqlite_found_size(const raw_sqlite *r) { return r->found_size; }

void raw_sqlite_close(raw_sqlite *r) {
    if (!r) return;
    sqlite3_finalize(r->insert);
    sqlite3_finalize(r->find);
    sqlite3_finalize(r->update);
    sqlite3_finalize(r->delete_);
    sqlite3_close(r->db);
    free(r->filler);
    free(r);
}

int raw_sqlite_row_sizes(const char *path, size_t *attributes_size, size_t *wrapped_key_size, size_t *value_size) {
    sqlite3 *db = NULL;
    sqlite3_stmt *statement = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "SELECT length(attributes), length(wrapped_key), length(value) FROM item LIMIT 1",
                                -1, &statement, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(statement);
        if (rc == SQLITE_ROW) {
            *attributes_size = (size_t)sqlite3_column_int64(statement, 0);
            *wrapped_key_size = (size_t)sqlite3_column_int64(statement, 1);
            *value_size = (size_t)sqlite3_column_int64(statement, 2);
            rc = SQLITE_OK;
        } else {
            rc = SQLITE_NOTFOUND;
        }
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return rc;
}

void raw_callgrind_toggle_collect(void) {
#ifdef CALLGRIND_TOGGLE_COLLECT
    CALLGRIND_TOGGLE_COLLECT;
#endif
}
