import Foundation
import KeychainServices
import KeychainStore
import TestSupport
import Testing

/// Attack review, finding 6: someone who can write `keychain.db` but holds no key spliced an item's earlier
/// attributes blob (with its earlier, weaker access control) back beside the current value, and read the current
/// value under the weaker list. Each part of a row was bound to the row, not to the other parts nor to a version.
@Suite(
    "Attack review: splicing parts of a row",
    .embeddedOnly("rewrites the files of a store under an engine this process opens again"))
struct SpliceAttackTests {
    /// The parts of the item's row as a writer of the file sees them.
    struct Parts {
        var attributes: Data
        var wrappedKey: Data
        var value: Data
        var generation: Int64?
    }

    func parts(_ directory: URL) throws -> Parts {
        let database = try KeychainDatabase(directory: directory)
        return try database.read { transaction in
            let row = try #require(try transaction.allItems().first)
            return Parts(
                attributes: row.attributes, wrappedKey: row.wrappedKey,
                value: try #require(try transaction.value(rowID: row.rowID)), generation: row.generation)
        }
    }

    func write(_ directory: URL, _ change: (inout StoredItem, Parts) -> Void, from old: Parts) throws {
        let database = try KeychainDatabase(directory: directory)
        try database.write { transaction in
            var row = try #require(try transaction.allItems().first)
            row.value = try transaction.value(rowID: row.rowID)
            change(&row, old)
            try transaction.update(row)
        }
    }

    @Test func anEarlierPartNeverFitsTheCurrentRow() throws {
        let splices: [(String, (inout StoredItem, Parts) -> Void)] = [
            ("attributes", { row, old in row.attributes = old.attributes }),
            (
                "attributes and generation",
                { row, old in
                    row.attributes = old.attributes
                    row.generation = old.generation
                }
            ),
            (
                "attributes, generation cleared",
                { row, old in
                    row.attributes = old.attributes
                    row.generation = nil
                }
            ),
            (
                "key and value",
                { row, old in
                    row.wrappedKey = old.wrappedKey
                    row.value = old.value
                }
            ),
        ]
        for (name, splice) in splices {
            let store = TestStore()
            // The engine asks for the passcode of the strict list itself (pam_matrix checks it), so a read gets as
            // far as opening the value.
            let client = try store.passcodeClient(presenter: PasscodeAnswers(Array(repeating: "secret", count: 4)))
            let open = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil))
            let strict = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .devicePasscode, nil))
            try store.with(client) {
                #expect(
                    addGenericPassword(
                        account: "a", password: "old", extra: [kSecAttrAccessControl as String: open]) == errSecSuccess)
            }
            let before = try parts(store.directory)
            try store.with(client) {
                let query =
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"] as CFDictionary
                #expect(
                    SecItemUpdate(
                        query,
                        [
                            kSecAttrAccessControl as String: strict, kSecValueData as String: Data("new".utf8),
                        ] as CFDictionary) == errSecSuccess)
                #expect(password(account: "a") == .success("new"))
            }
            try write(store.directory, splice, from: before)
            try store.with(client) {
                #expect(password(account: "a") == .failure(StatusError(status: errSecDecode)), "\(name)")
            }
        }
    }

    /// A generation column set to the largest value by a writer of the file makes the next update fail cleanly
    /// (errSecDecode), not trap.
    @Test func anOverflowingGenerationIsRefusedNotTrapped() throws {
        let store = TestStore()
        try store.with(try store.client()) { addGenericPassword(account: "g") }
        try write(store.directory, { row, _ in row.generation = .max }, from: try parts(store.directory))
        try store.with(try store.client()) {
            let query = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "g"] as CFDictionary
            #expect(SecItemUpdate(query, [kSecAttrLabel as String: "l"] as CFDictionary) == errSecDecode)
        }
    }

    /// Every write raises the row's generation.
    @Test func everyWriteRaisesTheGeneration() throws {
        let store = TestStore()
        try store.with(try store.client()) { addGenericPassword(account: "g") }
        #expect(try parts(store.directory).generation == 1)
        try store.with(try store.client()) {
            let query = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "g"] as CFDictionary
            #expect(SecItemUpdate(query, [kSecAttrLabel as String: "l"] as CFDictionary) == errSecSuccess)
        }
        #expect(try parts(store.directory).generation == 2)
    }
}

/// A store from the release before generations: opening it re-seals every row whose class is available, so the
/// splice that release allowed stops working at once, not only after each item's next update.
@Suite(
    "Attack review: stores from before row generations",
    .embeddedOnly("rewrites the files of a store under an engine this process opens again"))
struct LegacyStoreMigrationTests {
    /// A private copy of the fixture, its key files 0600 as the store expects (git keeps them 0644).
    func copyOfLegacyStore() throws -> TestStore {
        let store = TestStore()
        let fixture = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
            .appendingPathComponent("legacy-store-v2")
        try FileManager.default.createDirectory(at: store.directory, withIntermediateDirectories: true)
        for name in ["device.key", "keybag", "keybag.state", "keychain.db"] {
            let target = store.directory.appendingPathComponent(name)
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(name), to: target)
            chmod(target.path, 0o600)
        }
        chmod(store.directory.path, 0o700)
        return store
    }

    @Test func openingALegacyStoreResealsItsRowsAndTheOldSpliceFails() throws {
        let store = try copyOfLegacyStore()
        let fixture = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
            .appendingPathComponent("legacy-store-v2")
        let client = try store.passcodeClient(groups: ["test.app"], presenter: PasscodeAnswers("secret", "secret"))
        try store.with(client) {
            #expect(password(account: "kept") == .success("kept-value"))
            #expect(password(account: "spliced") == .success("new"))
        }
        let database = try KeychainDatabase(directory: store.directory)
        #expect(try database.read { try $0.allItems().allSatisfy { $0.generation == 1 } })

        // The attacker's copy of the attributes from before the update, with the generation cleared again.
        let old = try Data(contentsOf: fixture.appendingPathComponent("spliced-attributes-before-update.bin"))
        try database.write { transaction in
            var row = try #require(try transaction.allItems().last)
            row.attributes = old
            row.generation = nil
            try transaction.update(row)
        }
        try store.with(client) {
            #expect(password(account: "spliced") == .failure(StatusError(status: errSecDecode)))
        }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
