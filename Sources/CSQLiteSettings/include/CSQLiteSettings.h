#ifndef LA_CSQLITESETTINGS_H
#define LA_CSQLITESETTINGS_H

/* sqlite3_config is variadic, which Swift cannot call: localauthd turns SQLite's memory statistics off before its
 * first connection. With them on, every allocation SQLite makes takes a process-wide mutex (about ten per keychain
 * lookup, each lane thread contending for the same one); localauthd reads none of those statistics and sets no
 * soft heap limit. Only the daemon does this: an embedded client leaves its host program's SQLite as it is. */

/* SQLITE_OK (0), or SQLITE_MISUSE when SQLite was initialized already in this process (the setting then stays). */
int la_sqlite_disable_memory_statistics(void);

#endif
