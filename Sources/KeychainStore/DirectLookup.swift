import Foundation
import GRDBSQLite
import Synchronization

/// The keychain's hot path: a row read by its blind index with one statement prepared once per connection, on
/// connections of its own, through the SQLite C API.
///
/// A lookup by primary key is one indexed probe. Through GRDB's pool it also took a reader from the pool through a
/// dispatch queue, opened and committed an explicit transaction, and decoded through `Row`: about 130,000 of the
/// 216,000 instructions of a whole `SecItemCopyMatching` (BENCHMARKS.md, "The hot path"). Here the statement runs
/// in autocommit mode, so SQLite gives it its own read transaction: one consistent snapshot of the row, and no
/// writer is blocked (WAL). Each connection is used by one thread at a time; idle ones wait in a short list.
final class DirectLookup: Sendable {
    private let path: String
    private let idle = Mutex<[Connection]>([])
    /// How many idle connections are kept; more threads than this open and close their own.
    private static let idleLimit = 8

    init(path: String) {
        self.path = path
    }

    /// The row whose blind index is `blindIndex`, with its sealed value when `includingValue`; nil when none.
    ///
    /// - Throws: `StoreError.corrupt` when SQLite finds the file damaged, `.io` for its other failures.
    func item(blindIndex: Data, includingValue: Bool) throws -> StoredItem? {
        let connection = try idle.withLock { $0.popLast() } ?? Connection(path: path)
        let found = try connection.item(blindIndex: blindIndex, includingValue: includingValue)
        idle.withLock { connections in
            if connections.count < Self.idleLimit { connections.append(connection) }
        }
        return found
    }

    /// One SQLite connection and its prepared lookup statements (with and without the value column).
    private final class Connection: @unchecked Sendable {
        // @unchecked: used by one thread at a time (taken from and returned to `DirectLookup.idle`).
        private var db: OpaquePointer?
        private var withValue: OpaquePointer?
        private var withoutValue: OpaquePointer?

        private static let columns = "id, class, agrp, pdmn, sync, blind_index, attributes, wrapped_key, acl, gen"

        init(path: String) throws {
            let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
            var status = sqlite3_open_v2(path, &db, flags, nil)
            if status == SQLITE_OK { status = sqlite3_busy_timeout(db, 60_000) }
            if status == SQLITE_OK { status = sqlite3_exec(db, "PRAGMA query_only = ON", nil, nil, nil) }
            if status == SQLITE_OK {
                status = sqlite3_prepare_v3(
                    db, "SELECT \(Self.columns), value FROM item WHERE blind_index = ?", -1,
                    UInt32(SQLITE_PREPARE_PERSISTENT), &withValue, nil)
            }
            if status == SQLITE_OK {
                status = sqlite3_prepare_v3(
                    db, "SELECT \(Self.columns) FROM item WHERE blind_index = ?", -1,
                    UInt32(SQLITE_PREPARE_PERSISTENT), &withoutValue, nil)
            }
            guard status == SQLITE_OK else {
                let error = KeychainDatabase.storeError(code: status)
                close()
                throw error
            }
        }

        deinit { close() }

        private func close() {
            sqlite3_finalize(withValue)
            sqlite3_finalize(withoutValue)
            sqlite3_close_v2(db)
            (withValue, withoutValue, db) = (nil, nil, nil)
        }

        func item(blindIndex: Data, includingValue: Bool) throws -> StoredItem? {
            let statement = includingValue ? withValue : withoutValue
            // The key is bound SQLITE_TRANSIENT (copied), so a reset is all the statement needs before its next use.
            defer { sqlite3_reset(statement) }
            let bound = blindIndex.withUnsafeBytes { bytes in
                // SQLITE_TRANSIENT: SQLite copies the 32 bytes, so nothing outlives this closure.
                sqlite3_bind_blob(
                    statement, 1, bytes.baseAddress, Int32(bytes.count),
                    unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            }
            guard bound == SQLITE_OK else { throw KeychainDatabase.storeError(code: bound) }
            let status = sqlite3_step(statement)
            switch status {
            case SQLITE_DONE: return nil
            case SQLITE_ROW: break
            default: throw KeychainDatabase.storeError(code: status)
            }
            guard let statement else { return nil }
            return StoredItem(
                rowID: sqlite3_column_int64(statement, 0), itemClass: Self.text(statement, 1),
                accessGroup: Self.text(statement, 2), protectionClass: Self.text(statement, 3),
                synchronizable: sqlite3_column_int64(statement, 4) != 0,
                // The row was found by equality on this column.
                blindIndex: blindIndex,
                attributes: Self.blob(statement, 6), wrappedKey: Self.blob(statement, 7),
                hasAccessControl: Self.optionalInteger(statement, 8).map { $0 != 0 },
                generation: Self.optionalInteger(statement, 9),
                value: includingValue ? Self.blob(statement, 10) : nil)
        }

        private static func text(_ statement: OpaquePointer, _ column: Int32) -> String {
            guard let text = sqlite3_column_text(statement, column) else { return "" }
            return String(cString: text)
        }

        private static func blob(_ statement: OpaquePointer, _ column: Int32) -> Data {
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
            return Data(bytes: bytes, count: count)
        }

        private static func optionalInteger(_ statement: OpaquePointer, _ column: Int32) -> Int64? {
            sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
        }
    }
}
