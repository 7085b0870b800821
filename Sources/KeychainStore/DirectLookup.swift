import Foundation
import GRDBSQLite
import Synchronization

/// The keychain's hot path: a row read by its blind index with one statement prepared once per connection, on
/// connections of its own, through the SQLite C API.
///
/// A lookup by primary key is one indexed probe. Through GRDB's pool it also took a reader from the pool through a
/// dispatch queue, opened and committed an explicit transaction, and decoded through `Row`: about 130,000 of the
/// 216,000 instructions of a whole `SecItemCopyMatching` (docs/benchmarks-history.md, the hot path). Here the
/// statement runs in autocommit mode, so SQLite gives it its own read transaction: one consistent snapshot of the
/// row, and no writer is blocked (WAL). Each connection is used by one thread at a time; idle ones wait in a short
/// list.
final class DirectLookup: Sendable {
    private let path: String
    private let idle = Mutex<[Connection]>([])
    /// How many idle connections are kept; more threads than this open and close their own.
    private static let idleLimit = 8

    init(path: String) {
        self.path = path
    }

    /// Hands `body` the row whose blind index is `blindIndex` (its sealed value included when `includingValue`),
    /// read in place; false when there is none. (Not generic: across modules a generic result would be copied
    /// through value witnesses on every lookup.)
    ///
    /// - Throws: `StoreError.corrupt` when SQLite finds the file damaged, `.io` for its other failures; what `body`
    ///   throws.
    func withRow(
        blindIndex: RawSpan, includingValue: Bool, _ body: (borrowing DirectRow) throws -> Void
    ) throws -> Bool {
        let connection = try idle.withLock { $0.popLast() } ?? Connection(path: path)
        defer {
            idle.withLock { connections in
                if connections.count < Self.idleLimit { connections.append(connection) }
            }
        }
        return try connection.withRow(blindIndex: blindIndex, includingValue: includingValue, body)
    }

    /// One SQLite connection and its prepared lookup statements (with and without the value column).
    private final class Connection: @unchecked Sendable {
        // @unchecked: used by one thread at a time (taken from and returned to `DirectLookup.idle`).
        private var db: OpaquePointer?
        private var withValue: OpaquePointer?
        private var withoutValue: OpaquePointer?

        /// What the hot path reads: not the sealed attributes, which it leaves sealed, nor the blind index, which it
        /// looked the row up by (SQLite copies every text and blob column a statement selects, read or not).
        private static let columns = "id, class, agrp, pdmn, sync, wrapped_key, acl, gen"

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

        func withRow(
            blindIndex: RawSpan, includingValue: Bool, _ body: (borrowing DirectRow) throws -> Void
        ) throws -> Bool {
            guard let statement = includingValue ? withValue : withoutValue else { return false }
            // The key is bound SQLITE_STATIC, where it lies (a copy cost SQLite a malloc per lookup), inside the
            // closure that lends its address; the binding is cleared with the reset before the closure returns, so
            // the statement never keeps a pointer to it.
            return try blindIndex.withUnsafeBytes { key in
                defer {
                    sqlite3_reset(statement)
                    sqlite3_clear_bindings(statement)
                }
                let bound = sqlite3_bind_blob(statement, 1, key.baseAddress, Int32(key.count), nil)  // nil: STATIC
                guard bound == SQLITE_OK else { throw KeychainDatabase.storeError(code: bound) }
                let status = sqlite3_step(statement)
                switch status {
                case SQLITE_DONE: return false
                case SQLITE_ROW: break
                default: throw KeychainDatabase.storeError(code: status)
                }
                // The columns' bytes stay where SQLite holds them until the deferred reset, which runs after `body`
                // returns. The compiler ties the row's spans only to this scope (`statement`), not to the reset:
                // what keeps them from outliving it is that the row is nonescapable, so `body` cannot keep it or any
                // of its columns.
                let row = DirectRow(
                    rowID: sqlite3_column_int64(statement, 0), itemClass: Self.bytes(statement, 1),
                    accessGroup: Self.bytes(statement, 2), protectionClass: Self.bytes(statement, 3),
                    synchronizable: sqlite3_column_int64(statement, 4) != 0,
                    // The row was found by equality on this column.
                    blindIndex: blindIndex,
                    wrappedKey: Self.bytes(statement, 5),
                    hasAccessControl: Self.optionalInteger(statement, 6).map { $0 != 0 },
                    generation: Self.optionalInteger(statement, 7),
                    value: includingValue ? Self.bytes(statement, 8) : nil)
                try body(row)
                return true
            }
        }

        /// A text or blob column's bytes where SQLite holds them (the pointer first, then its length, as SQLite's
        /// documentation orders the two calls), valid until the statement steps or resets.
        @_lifetime(borrow statement)
        private static func bytes(_ statement: OpaquePointer, _ column: Int32) -> RawSpan {
            let start = sqlite3_column_blob(statement, column)
            let span = RawSpan(
                _unsafeBytes: UnsafeRawBufferPointer(
                    start: start, count: start == nil ? 0 : Int(sqlite3_column_bytes(statement, column))))
            return _overrideLifetime(span, borrowing: statement)
        }

        private static func optionalInteger(_ statement: OpaquePointer, _ column: Int32) -> Int64? {
            sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
        }
    }
}

/// A row of the keychain's table as SQLite holds it during a lookup: its columns in place (all but the sealed
/// attributes, which the hot path leaves sealed), as spans that cannot outlive the closure the row is handed to
/// (``DirectLookup/withRow(blindIndex:includingValue:_:)``): the compiler refuses code that keeps one.
package struct DirectRow: ~Copyable, ~Escapable {
    package let rowID: Int64
    package let itemClass: RawSpan
    package let accessGroup: RawSpan
    package let protectionClass: RawSpan
    package let synchronizable: Bool
    package let blindIndex: RawSpan
    package let wrappedKey: RawSpan
    package let hasAccessControl: Bool?
    package let generation: Int64?
    /// The sealed value, when the lookup asked for it.
    package let value: RawSpan?

    @_lifetime(copy itemClass, copy accessGroup, copy protectionClass, copy blindIndex, copy wrappedKey, copy value)
    init(
        rowID: Int64, itemClass: RawSpan, accessGroup: RawSpan, protectionClass: RawSpan, synchronizable: Bool,
        blindIndex: RawSpan, wrappedKey: RawSpan, hasAccessControl: Bool?, generation: Int64?, value: RawSpan?
    ) {
        self.rowID = rowID
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.protectionClass = protectionClass
        self.synchronizable = synchronizable
        self.blindIndex = blindIndex
        self.wrappedKey = wrappedKey
        self.hasAccessControl = hasAccessControl
        self.generation = generation
        self.value = value
    }
}
