import Foundation
import Testing

@testable import KeychainStore

@Suite("Keychain database schema")
struct MigrationTests {
    private func sqlite(_ path: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aVersionOneStoreIsMigratedAndKeepsItsRows() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(KeychainDatabase.fileName).path
        // The schema as version 1 wrote it, with GRDB's record of the applied migration and one row.
        _ = try sqlite(
            path,
            """
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1');
            CREATE TABLE item (id INTEGER PRIMARY KEY AUTOINCREMENT, class TEXT NOT NULL, agrp TEXT NOT NULL,
                pdmn TEXT NOT NULL, sync INTEGER NOT NULL, blind_index BLOB NOT NULL UNIQUE, attributes BLOB NOT NULL,
                wrapped_key BLOB NOT NULL, value BLOB NOT NULL);
            CREATE INDEX item_by_class ON item(class, agrp, sync);
            INSERT INTO item (class, agrp, pdmn, sync, blind_index, attributes, wrapped_key, value)
                VALUES ('genp', 'g', 'ak', 0, x'01', x'02', x'03', x'04');
            """)
        let database = try KeychainDatabase(directory: directory)
        let rows = try database.read { try $0.allItems() }
        #expect(rows.count == 1)
        #expect(rows.first?.hasAccessControl == nil)
        #expect(rows.first?.wrappedKey == Data([3]))
        try database.write { transaction in
            var row = rows[0]
            row.hasAccessControl = true
            try transaction.update(row)
        }
        #expect(try database.read { try $0.allItems().first?.hasAccessControl } == true)
        #expect(try database.read { try $0.value(rowID: rows[0].rowID) } == Data([4]))
        #expect(try sqlite(path, "SELECT identifier FROM grdb_migrations ORDER BY identifier") == "v1\nv2\nv3")
    }

    @Test func duplicateBlindIndexesAreReportedAsDuplicates() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try KeychainDatabase(directory: directory)
        let row = StoredItem(
            rowID: 1, itemClass: "genp", accessGroup: "g", protectionClass: "ak", synchronizable: false,
            blindIndex: Data([9]), attributes: Data([1]), wrappedKey: Data([2]), value: Data([3]))
        try database.write { try $0.insert(row) }
        var clash = row
        clash.rowID = 2
        #expect(throws: StoreError.self) { try database.write { try $0.insert(clash) } }
        #expect(try database.read { try $0.nextRowID() } == 2)
    }
}
