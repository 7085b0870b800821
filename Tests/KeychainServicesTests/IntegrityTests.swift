import Foundation
import KeychainServices
import KeychainStore
import SecurityClient
import SecurityServer
import SwiftKeychain
import TestSupport
import Testing

@Suite("Store integrity")
struct IntegrityTests {
    @Test func storeFilesArePrivate() throws {
        let store = TestStore()
        try store.with { addGenericPassword(account: "a") }
        func mode(_ name: String) throws -> Int {
            let directory = store.storeDirectory
            let path = name.isEmpty ? directory.path : directory.appendingPathComponent(name).path
            return (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        #expect(try mode("") == 0o700)
        for name in ["keychain.db", rootKeyFileName, "keybag", "keybag.state"] {
            #expect(try mode(name) == 0o600, "\(name)")
        }
        let wal = store.storeDirectory.appendingPathComponent("keychain.db-wal").path
        if FileManager.default.fileExists(atPath: wal) { #expect(try mode("keychain.db-wal") == 0o600) }
    }

    @Test func nothingSecretIsStoredInClear() throws {
        let store = TestStore()
        try store.with {
            addGenericPassword(
                account: "clear-account-marker", service: "clear-service-marker", password: "clear-password-marker")
        }
        #expect(FileManager.default.fileExists(atPath: store.storeDirectory.appendingPathComponent("keychain.db").path))
        for name in ["keychain.db", "keychain.db-wal"] {
            guard
                let contents = FileManager.default.contents(
                    atPath: store.storeDirectory.appendingPathComponent(name).path)
            else { continue }
            for marker in ["clear-account-marker", "clear-service-marker", "clear-password-marker"] {
                #expect(contents.range(of: Data(marker.utf8)) == nil, "\(marker) in \(name)")
            }
        }
    }

    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func swappedCiphertextsBetweenRowsAreDetected() throws {
        let store = TestStore()
        let client = try store.client()
        try store.with(client) {
            addGenericPassword(account: "a", password: "pa")
            addGenericPassword(account: "b", password: "pb")
        }
        let database = try KeychainDatabase(directory: store.directory)
        try database.write { transaction in
            var rows = try transaction.allItems()
            let values = try rows.map { try transaction.value(rowID: $0.rowID) }
            (rows[0].wrappedKey, rows[1].wrappedKey) = (rows[1].wrappedKey, rows[0].wrappedKey)
            rows[0].value = values[1]
            rows[1].value = values[0]
            try transaction.update(rows[0])
            try transaction.update(rows[1])
        }
        try store.with(client) {
            #expect(password(account: "a").map { _ in true } == .failure(StatusError(status: errSecDecode)))
            #expect(password(account: "b").map { _ in true } == .failure(StatusError(status: errSecDecode)))
        }
    }

    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func swappedAttributesAndMovedRowsAreDetected() throws {
        let store = TestStore()
        let client = try store.client(groups: ["one", "two"])
        try store.with(client) {
            addGenericPassword(account: "a")
            addGenericPassword(account: "b")
        }
        let database = try KeychainDatabase(directory: store.directory)
        try database.write { transaction in
            var rows = try transaction.allItems()
            (rows[0].attributes, rows[1].attributes) = (rows[1].attributes, rows[0].attributes)
            try transaction.update(rows[0])
            try transaction.update(rows[1])
        }
        try store.with(client) {
            #expect(genericPasswordCount() == 0)
            #expect(copyMatching([kSecClass as String: kSecClassGenericPassword]).0 == errSecDecode)
        }
        let other = TestStore()
        let otherClient = try other.client(groups: ["one", "two"])
        try other.with(otherClient) { addGenericPassword(account: "c") }
        let otherDatabase = try KeychainDatabase(directory: other.directory)
        try otherDatabase.write { transaction in
            var row = try transaction.allItems()[0]
            row.accessGroup = "two"
            try transaction.update(row)
        }
        try other.with(otherClient) {
            #expect(copyMatching([kSecClass as String: kSecClassGenericPassword]).0 == errSecDecode)
        }
    }

    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func clearingTheAccessControlFlagDoesNotReleaseData() throws {
        let store = TestStore()
        let client = try store.client()
        try store.with(client) {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            addGenericPassword(account: "guarded", password: "secret", extra: [kSecAttrAccessControl as String: access])
            addGenericPassword(account: "open", password: "plain")
        }
        let database = try KeychainDatabase(directory: store.directory)
        let flags = try database.read { try $0.allItems().map(\.hasAccessControl) }
        #expect(flags == [true, false])
        for forged in [false, nil] as [Bool?] {
            try database.write { transaction in
                var row = try transaction.allItems()[0]
                row.hasAccessControl = forged
                row.value = try transaction.value(rowID: row.rowID)
                try transaction.update(row)
            }
            try store.with(client) {
                #expect(password(account: "guarded") == .failure(StatusError(status: errSecDecode)))
                #expect(password(account: "open") == .success("plain"))
            }
        }
    }

    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func flippedBytesInTheDatabaseFileAreDetected() throws {
        let store = TestStore()
        var sealedAttributes = Data()
        do {
            let client = try store.client()
            try store.with(client) {
                for index in 0..<20 { addGenericPassword(account: "account-\(index)", password: "password-\(index)") }
            }
            let database = try KeychainDatabase(directory: store.directory)
            sealedAttributes = try database.read { try $0.allItems()[7].attributes }
        }
        // Every connection is closed now, so the WAL has been checkpointed into keychain.db.
        let path = store.directory.appendingPathComponent("keychain.db").path
        var contents = try #require(FileManager.default.contents(atPath: path))
        let range = try #require(contents.range(of: sealedAttributes))
        contents[range.lowerBound + 20] ^= 0x5A
        try contents.write(to: URL(fileURLWithPath: path))
        try store.with {
            #expect(
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
                ]).0 == errSecDecode)
            #expect(password(account: "account-3") == .success("password-3"))
        }
    }
}

@Suite("Store scale", .serialized)
struct ScaleTests {
    @Test func fifteenThousandItemsWithEveryAttribute() throws {
        let store = TestStore()
        try store.with {
            let count = 15_000
            for index in 0..<count {
                let item: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrAccount as String: "account-\(index)", kSecAttrService as String: "service-\(index % 7)",
                    kSecAttrLabel as String: "label \(index)", kSecAttrDescription as String: "description \(index)",
                    kSecAttrComment as String: "comment \(index)", kSecAttrCreator as String: index,
                    kSecAttrType as String: index % 3, kSecAttrIsInvisible as String: index % 2 == 0,
                    kSecAttrIsNegative as String: false,
                    kSecAttrGeneric as String: Data(repeating: UInt8(index % 251), count: 64),
                    kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                    kSecValueData as String: Data("value-\(index)".utf8),
                ]
                guard SecItemAdd(item as CFDictionary, nil) == errSecSuccess else {
                    Issue.record("add \(index) failed")
                    return
                }
            }
            #expect(genericPasswordCount() == count)
            for index in stride(from: 0, to: count, by: 997) {
                #expect(
                    password(account: "account-\(index)", service: "service-\(index % 7)") == .success("value-\(index)")
                )
            }
            let byLabel =
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrLabel as String: "label 14999",
                    kSecReturnAttributes as String: true,
                ]).1 as? [String: Any]
            #expect(byLabel?[kSecAttrCreator as String] as? Int == 14999)
            #expect(byLabel?.count ?? 0 >= 15)
            #expect(
                SecItemDelete(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "service-0"]
                        as CFDictionary) == errSecSuccess)
            #expect(genericPasswordCount() == count - (count + 6) / 7)
        }
    }

    @Test func sixteenMebibyteValueRoundTrips() throws {
        try TestStore().with {
            var value = Data(count: 16 << 20)
            value.withUnsafeMutableBytes { buffer in
                for index in stride(from: 0, to: buffer.count, by: 4096) {
                    buffer[index] = UInt8(truncatingIfNeeded: index >> 12)
                }
            }
            value[value.count - 1] = 0xEE
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "big",
                kSecValueData as String: value,
            ]
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "big",
                kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(result as? Data == value)
        }
    }
}
