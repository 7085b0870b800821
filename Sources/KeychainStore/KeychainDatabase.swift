import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The keychain's SQLite database: one file `keychain.db` (plus its WAL) in a 0700 directory, opened through GRDB
/// in WAL mode with `secure_delete` on, migrated from schema version 1.
///
/// Several processes may open the same file: writes take SQLite's write lock at `BEGIN IMMEDIATE` and wait up to
/// the busy timeout for it, so concurrent writers serialize instead of failing.
///
/// A file SQLite finds damaged when it is opened does not stop the store from opening: every operation then fails
/// with `StoreError.corrupt` naming the file, while ``check()`` reports the damage and
/// ``setAsideAndStartAfresh()`` moves the file aside for a restore from a backup (as Apple's securityd moves a
/// corrupt `keychain-2.db` aside, here only when the user asks).
package final class KeychainDatabase: Sendable {
    /// The file name of the database inside the store directory.
    package static let fileName = "keychain.db"

    /// The open file, or why it does not open; replaced when a damaged file is set aside.
    private let state: Mutex<State>
    /// Where the database file lives.
    package let path: String

    private enum State {
        case open(Handles)
        case damaged(String)
    }

    /// GRDB's pool and the hot path's connections on one file. An operation holds its own reference, so one that
    /// runs while the file is set aside finishes on the old file.
    private final class Handles: Sendable {
        let pool: DatabasePool
        /// Lookups by blind index, outside GRDB (the hot path).
        let direct: DirectLookup
        let changes: ChangeWatch

        init(pool: DatabasePool, path: String) {
            self.pool = pool
            direct = DirectLookup(path: path)
            changes = ChangeWatch(path: path)
        }
    }

    /// Opens (creating if needed, mode 0600) the database in `directory` and runs pending migrations. A file SQLite
    /// finds damaged opens in the damaged state (see the type's description).
    ///
    /// - Throws: `StoreError.io` when the file cannot be created or opened, `.readOnly` when it is on a read-only
    ///   filesystem or not writable.
    package init(directory: URL) throws {
        let path = directory.appendingPathComponent(Self.fileName).path
        self.path = path
        state = Mutex(try Self.opening(path))
    }

    private static func opening(_ path: String) throws -> State {
        try createPrivateFile(at: path)
        var configuration = Configuration()
        configuration.busyMode = .timeout(60)
        configuration.journalMode = .wal
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            try migrator.migrate(pool)
            return .open(Handles(pool: pool, path: path))
        } catch {
            let failure = storeError(error, path: path)
            if let damage = failure as? StoreError, damage.code == .corrupt { return .damaged(damage.message) }
            throw failure
        }
    }

    /// The open file's handles. - Throws: `StoreError.corrupt` when the file was damaged when opened.
    private func handles() throws -> Handles {
        try state.withLock { state in
            switch state {
            case .open(let handles): return handles
            case .damaged(let reason): throw StoreError(.corrupt, reason)
            }
        }
    }

    /// Hands `body` the row whose blind index is `blindIndex` (with its sealed value when `includingValue`), read
    /// in place by one statement outside any explicit transaction: the hot path of a lookup by primary key. The
    /// row's columns are valid only while `body` runs. False when there is no such row.
    ///
    /// - Throws: `StoreError.corrupt` when the file is damaged, `.io` for other SQLite failures; what `body` throws.
    package func withItem(
        blindIndex: RawSpan, includingValue: Bool, _ body: (borrowing DirectRow) throws -> Void
    ) throws -> Bool {
        do {
            return try handles().direct.withRow(blindIndex: blindIndex, includingValue: includingValue, body)
        } catch {
            throw Self.storeError(error, path: path)
        }
    }

    /// Where the file stands: equal to an earlier stamp only when no connection, of this process or another, has
    /// committed since (and the file was not set aside). One statement on a connection of its own; nothing is read.
    package struct ChangeStamp: Hashable, Sendable {
        /// Which file: a number given to each file this process opens.
        package var file: UInt64
        /// SQLite's count of the commits other connections made.
        package var version: Int64
    }

    /// The file's ``ChangeStamp`` now.
    ///
    /// - Throws: `StoreError.corrupt` when the file is damaged, `.io` for other SQLite failures.
    package func changeStamp() throws -> ChangeStamp {
        do {
            return try handles().changes.stamp()
        } catch {
            throw Self.storeError(error, path: path)
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // AUTOINCREMENT: row ids are never reused, so a persistent reference never names a later item.
            try db.execute(
                sql: """
                    CREATE TABLE item (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        class TEXT NOT NULL,
                        agrp TEXT NOT NULL,
                        pdmn TEXT NOT NULL,
                        sync INTEGER NOT NULL,
                        blind_index BLOB NOT NULL UNIQUE,
                        attributes BLOB NOT NULL,
                        wrapped_key BLOB NOT NULL,
                        value BLOB NOT NULL
                    );
                    CREATE INDEX item_by_class ON item(class, agrp, sync);
                    """)
        }
        migrator.registerMigration("v2") { db in
            // Whether the item has an access-control list, in clear (and in every ciphertext's associated data), so
            // a lookup that only returns data can skip decrypting attributes. NULL for rows written before: those
            // always take the path that decrypts them.
            try db.execute(sql: "ALTER TABLE item ADD COLUMN acl INTEGER")
        }
        migrator.registerMigration("v3") { db in
            // The row's generation, bound into every ciphertext's associated data (with the list's hash), so an
            // earlier version of one part never fits the current others. NULL for rows sealed before: the engine
            // re-seals those as soon as their class key is available.
            try db.execute(sql: "ALTER TABLE item ADD COLUMN gen INTEGER")
            try db.execute(sql: "CREATE INDEX item_legacy ON item(id) WHERE gen IS NULL")
        }
        return migrator
    }

    /// Creates an empty file with mode 0600 unless it exists; SQLite gives its WAL and shared-memory files the same
    /// mode as the database file.
    private static func createPrivateFile(at path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == EROFS || code == EACCES || code == EPERM {
                let reason = String(cString: strerror(code))
                throw StoreError(.readOnly, "the keychain database \(path) cannot be written (\(reason))")
            }
            throw StoreError(.io, "cannot create the keychain database \(path) (\(String(cString: strerror(code))))")
        }
        fchmod(fd, 0o600)
        close(fd)
    }

    /// Runs `body` in a read transaction (a consistent snapshot).
    package func read<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        do {
            return try handles().pool.read { db in try body(StoreTransaction(db: db)) }
        } catch {
            throw Self.storeError(error, path: path)
        }
    }

    /// Runs `body` in an immediate write transaction; any error rolls everything back.
    package func write<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        do {
            return try handles().pool.write { db in try body(StoreTransaction(db: db)) }
        } catch {
            throw Self.storeError(error, path: path)
        }
    }

    /// What SQLite's own check finds wrong with the file (empty when nothing), and how many rows the item table
    /// holds (nil when it cannot be counted). Reads every page: as long as a full scan of the file.
    package func check() -> (problems: [String], rowCount: Int?) {
        let handles: Handles
        do {
            handles = try self.handles()
        } catch {
            return ([Self.message(of: error)], nil)
        }
        var problems: [String] = []
        var rowCount: Int?
        do {
            try handles.pool.read { db in
                let verdict = try String.fetchAll(db, sql: "PRAGMA integrity_check(20)")
                if verdict != ["ok"] { problems += verdict.map { "SQLite: \($0)" } }
                rowCount = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item")
            }
        } catch {
            problems.append(Self.message(of: Self.storeError(error, path: path)))
        }
        return (problems, rowCount)
    }

    private static func message(of error: any Error) -> String {
        (error as? StoreError)?.message ?? "\(error)"
    }

    /// Moves the damaged file (and its WAL) aside to `keychain.db.damaged-<time>` beside it, never deleting it,
    /// and starts an empty database in its place. Operations already running finish on the old file.
    ///
    /// - Returns: the path the damaged file was moved to.
    /// - Throws: `StoreError.io` when the files cannot be moved or the new one created.
    package func setAsideAndStartAfresh() throws -> String {
        try state.withLock { state in
            var stamp = time(nil)
            var parts = tm()
            gmtime_r(&stamp, &parts)
            let base = String(
                format: "%@.damaged-%04d%02d%02dT%02d%02d%02dZ", path, parts.tm_year + 1900, parts.tm_mon + 1,
                parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
            // A second damage within the same second gets a number after the time.
            var aside = base
            var suffix = 1
            while access(aside, F_OK) == 0 {
                suffix += 1
                aside = base + "~\(suffix)"
            }
            guard rename(path, aside) == 0 else {
                throw StoreError(.io, "cannot move the keychain database \(path) aside (errno \(errno))")
            }
            // The WAL goes with it (it belongs to that file); the shared-memory index is rebuilt from a WAL.
            _ = rename(path + "-wal", aside + "-wal")
            unlink(path + "-shm")
            state = try Self.opening(path)
            return aside
        }
    }

    /// Maps SQLite failures onto store codes (with SQLite's message for damage and file failures); errors that are
    /// not SQLite's pass through unchanged.
    static func storeError(_ error: any Error) -> any Error {
        guard let error = error as? DatabaseError else { return error }
        var failure = storeError(code: error.extendedResultCode.rawValue)
        if failure.code == .corrupt || failure.code == .readOnly || failure.code == .io, let detail = error.message {
            failure.message += " (SQLite: \(detail))"
        }
        return failure
    }

    /// `error` mapped as by ``storeError(_:)``, its message naming the file when it is about the file (damage, a
    /// read-only or failing file).
    static func storeError(_ error: any Error, path: String) -> any Error {
        guard var failure = storeError(error) as? StoreError else { return storeError(error) }
        if failure.code == .corrupt || failure.code == .readOnly || failure.code == .io,
            !failure.message.contains(path)
        {
            failure.message = "the keychain database \(path): \(failure.message)"
        }
        return failure
    }

    /// The store's error for an SQLite result code, extended or primary (GRDB's failures and the direct lookup's).
    static func storeError(code: Int32) -> StoreError {
        switch code & 0xff {
        case SQLITE_CONSTRAINT where code == ResultCode.SQLITE_CONSTRAINT_UNIQUE.rawValue:
            StoreError(.duplicate, "an item with the same primary key exists")
        case SQLITE_FULL: StoreError(.diskFull, "the disk is full")
        case SQLITE_CORRUPT, SQLITE_NOTADB: StoreError(.corrupt, "the file is damaged")
        case SQLITE_READONLY: StoreError(.readOnly, "the file cannot be written")
        default: StoreError(.io, "SQLite error \(code & 0xff)")
        }
    }
}

/// Row operations inside one transaction of a `KeychainDatabase`.
package struct StoreTransaction {
    let db: Database

    private static let columnsWithoutValue =
        "id, class, agrp, pdmn, sync, blind_index, attributes, wrapped_key, acl, gen"

    /// The id the next inserted row will get (ids are never reused); valid until this transaction ends.
    package func nextRowID() throws -> Int64 {
        let last =
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'")) ?? 0
        let highest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(id) FROM item")) ?? 0
        return max(last, highest) + 1
    }

    /// Inserts `item` with its own row id. - Throws: `StoreError.duplicate` when the blind index exists.
    package func insert(_ item: StoredItem) throws {
        do {
            try db.cachedStatement(
                sql: """
                    INSERT INTO item (id, class, agrp, pdmn, sync, blind_index, attributes, wrapped_key, value, acl, gen)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    item.rowID, item.itemClass, item.accessGroup, item.protectionClass, item.synchronizable,
                    item.blindIndex, item.attributes, item.wrappedKey, item.value ?? Data(), item.hasAccessControl,
                    item.generation,
                ])
        } catch {
            throw KeychainDatabase.storeError(error)
        }
    }

    /// Replaces the columns of row `item.rowID`; the value column only when `item.value` is set.
    ///
    /// - Throws: `StoreError.duplicate` on a blind-index clash.
    package func update(_ item: StoredItem) throws {
        do {
            var arguments: StatementArguments = [
                item.itemClass, item.accessGroup, item.protectionClass, item.synchronizable, item.blindIndex,
                item.attributes, item.wrappedKey, item.hasAccessControl, item.generation,
            ]
            var sql = """
                UPDATE item SET class = ?, agrp = ?, pdmn = ?, sync = ?, blind_index = ?, attributes = ?,
                wrapped_key = ?, acl = ?, gen = ?
                """
            if let value = item.value {
                sql += ", value = ?"
                _ = arguments.append(contentsOf: [value])
            }
            sql += " WHERE id = ?"
            _ = arguments.append(contentsOf: [item.rowID])
            try db.cachedStatement(sql: sql).execute(arguments: arguments)
        } catch {
            throw KeychainDatabase.storeError(error)
        }
    }

    /// Deletes row `rowID`.
    package func delete(rowID: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [rowID])
    }

    /// The rows whose blind index is one of `indexes`, with their sealed values when `includingValues`.
    package func items(blindIndexes indexes: [Data], includingValues: Bool = false) throws -> [StoredItem] {
        var result: [StoredItem] = []
        let columns = includingValues ? "\(Self.columnsWithoutValue), value" : Self.columnsWithoutValue
        let statement = try db.cachedStatement(sql: "SELECT \(columns) FROM item WHERE blind_index = ?")
        for index in indexes {
            if let row = try Row.fetchOne(statement, arguments: [index]) {
                result.append(Self.item(from: row, withValue: includingValues))
            }
        }
        return result
    }

    /// The rows of `itemClass` in `accessGroups` (all groups when nil) with `synchronizable` (either when nil),
    /// without their values, in row-id order.
    package func items(itemClass: String, accessGroups: [String]?, synchronizable: Bool?) throws -> [StoredItem] {
        var sql = "SELECT \(Self.columnsWithoutValue) FROM item WHERE class = ?"
        var arguments: StatementArguments = [itemClass]
        if let accessGroups {
            if accessGroups.isEmpty { return [] }
            sql += " AND agrp IN (\(Array(repeating: "?", count: accessGroups.count).joined(separator: ",")))"
            for group in accessGroups { _ = arguments.append(contentsOf: [group]) }
        }
        if let synchronizable {
            sql += " AND sync = ?"
            _ = arguments.append(contentsOf: [synchronizable])
        }
        sql += " ORDER BY id"
        // Cached per text (one per count of groups): a scan of a class came back to SQLite's parser every time.
        return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
            .map { Self.item(from: $0, withValue: false) }
    }

    /// Every row, without values, in row-id order.
    package func allItems() throws -> [StoredItem] {
        try Row.fetchAll(db, sql: "SELECT \(Self.columnsWithoutValue) FROM item ORDER BY id")
            .map { Self.item(from: $0, withValue: false) }
    }

    /// The rows sealed before generations existed, without their values.
    package func legacyItems() throws -> [StoredItem] {
        try Row.fetchAll(db, sql: "SELECT \(Self.columnsWithoutValue) FROM item WHERE gen IS NULL ORDER BY id")
            .map { Self.item(from: $0, withValue: false) }
    }

    /// Row `rowID` without its value.
    package func item(rowID: Int64) throws -> StoredItem? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(Self.columnsWithoutValue) FROM item WHERE id = ?"), arguments: [rowID]
        )
        .map { Self.item(from: $0, withValue: false) }
    }

    /// The sealed value of row `rowID`.
    package func value(rowID: Int64) throws -> Data? {
        try Data.fetchOne(
            db.cachedStatement(sql: "SELECT value FROM item WHERE id = ?"), arguments: [rowID])
    }

    private static func item(from row: Row, withValue: Bool) -> StoredItem {
        StoredItem(
            rowID: row[0], itemClass: row[1], accessGroup: row[2], protectionClass: row[3], synchronizable: row[4],
            blindIndex: row[5], attributes: row[6], wrappedKey: row[7], hasAccessControl: row[8], generation: row[9],
            value: withValue ? row[10] : nil)
    }
}
