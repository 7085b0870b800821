import GRDBSQLite
import Synchronization

/// Tells whether the database file changed, cheaply and exactly: SQLite's `PRAGMA data_version` on a connection of
/// its own that never writes, so its count moves with every commit by any other connection, in this process or
/// another (SQLite reads it from the shared WAL index; no page is read).
final class ChangeWatch: Sendable {
    /// The watch of each opened file gets its own number, so a file set aside and started afresh never repeats a
    /// stamp of the one before.
    private static let opened = Atomic<UInt64>(0)

    private let file: UInt64
    private let connection: Mutex<Connection?>
    private let path: String

    init(path: String) {
        self.path = path
        file = Self.opened.add(1, ordering: .relaxed).newValue
        connection = Mutex(nil)
    }

    /// The file's current stamp: equal to an earlier one only when nothing was committed in between.
    ///
    /// - Throws: `StoreError` when SQLite cannot read the file.
    func stamp() throws -> KeychainDatabase.ChangeStamp {
        try connection.withLock { connection in
            if connection == nil { connection = try Connection(path: path) }
            return KeychainDatabase.ChangeStamp(file: file, version: try connection!.dataVersion())
        }
    }

    private final class Connection: @unchecked Sendable {
        // @unchecked: used only under `ChangeWatch.connection`'s lock.
        private var db: OpaquePointer?
        private var statement: OpaquePointer?

        init(path: String) throws {
            var status = sqlite3_open_v2(
                path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nil)
            // Short: the count is read from the WAL index without a lock, except while a connection recovers the
            // file; a stamp that cannot be read then only means nothing is kept for a moment.
            if status == SQLITE_OK { status = sqlite3_busy_timeout(db, 1_000) }
            if status == SQLITE_OK { status = sqlite3_exec(db, "PRAGMA query_only = ON", nil, nil, nil) }
            if status == SQLITE_OK {
                status = sqlite3_prepare_v3(
                    db, "PRAGMA data_version", -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
            }
            guard status == SQLITE_OK else {
                sqlite3_finalize(statement)
                sqlite3_close_v2(db)
                throw KeychainDatabase.storeError(code: status)
            }
        }

        deinit {
            sqlite3_finalize(statement)
            sqlite3_close_v2(db)
        }

        func dataVersion() throws -> Int64 {
            defer { sqlite3_reset(statement) }
            let status = sqlite3_step(statement)
            guard status == SQLITE_ROW else { throw KeychainDatabase.storeError(code: status) }
            return sqlite3_column_int64(statement, 0)
        }
    }
}
