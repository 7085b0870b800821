import EmbeddedEngine
import Foundation
import KeychainServices
import SecurityClient
import SecurityServer
import SwiftKeychain
import TestSupport
import Testing

@Suite("Keychain events")
struct EventTests {
    @Test func eventsReportAddsUpdatesDeletesAndLocking() async throws {
        let store = TestStore()
        let client = try store.passcodeClient(groups: ["app"])
        let keychain = Keychain(client: client)
        var iterator = try keychain.events().makeAsyncIterator()
        try keychain.add(GenericPassword(service: "s", account: "a", password: Data("p".utf8)))
        try keychain.update(.genericPasswords(service: "s", account: "a"), setting: .label("l"))
        try keychain.delete(.genericPasswords(service: "s"))
        try keychain.lock()
        try keychain.unlock()
        var kinds: [KeychainEvent.Kind] = []
        for _ in 0..<5 { if let event = await iterator.next() { kinds.append(event.kind) } }
        #expect(kinds == [.added, .updated, .deleted, .locked, .unlocked])
    }

    @Test func eventsOfOtherAccessGroupsAreNotSeen() async throws {
        let store = TestStore()
        let owner = try store.client(groups: ["owner"])
        let stranger = try store.sibling(of: owner, groups: ["stranger"])
        var strangerEvents = try Keychain(client: stranger).events().makeAsyncIterator()
        var ownerEvents = try Keychain(client: owner).events().makeAsyncIterator()
        try Keychain(client: owner).add(GenericPassword(service: "s", account: "private", password: Data()))
        try Keychain(client: stranger).add(GenericPassword(service: "s", account: "own", password: Data()))
        let first = await strangerEvents.next()
        #expect(first?.accessGroup == "stranger")
        #expect(await ownerEvents.next()?.accessGroup == "owner")
    }
}

@Suite("Keychain backup")
struct BackupTests {
    @Test func backupCarriesMigratoryItemsIntoAnotherStore() throws {
        let source = TestStore()
        let target = TestStore()
        let file = source.directory.deletingLastPathComponent().appendingPathComponent("backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let sourceKeychain = Keychain(client: try source.client(groups: ["app"]))
        try sourceKeychain.add(GenericPassword(service: "s", account: "migrates", password: Data("m".utf8)))
        try sourceKeychain.add(
            GenericPassword(
                service: "s", account: "stays", password: Data("d".utf8), accessibility: .whenUnlockedThisDeviceOnly))
        try sourceKeychain.add(
            InternetPassword(server: "example.com", account: "u", password: Data("i".utf8), port: 443))
        try source.with(try source.client(groups: ["app"])) {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            #expect(
                addGenericPassword(account: "guarded", extra: [kSecAttrAccessControl as String: access])
                    == errSecSuccess)
        }
        #expect(try sourceKeychain.exportBackup(to: file, password: Data("backup pw".utf8)) == 2)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let contents = try Data(contentsOf: file)
        #expect(contents.range(of: Data("migrates".utf8)) == nil)

        let targetKeychain = Keychain(client: try target.client(groups: ["app"]))
        #expect(throws: KeychainError(status: errSecAuthFailed)) {
            try targetKeychain.importBackup(from: file, password: Data("wrong".utf8))
        }
        #expect(try targetKeychain.importBackup(from: file, password: Data("backup pw".utf8)) == 2)
        #expect(try targetKeychain.genericPassword(service: "s", account: "migrates")?.password == Data("m".utf8))
        #expect(try targetKeychain.genericPassword(service: "s", account: "stays") == nil)
        #expect(try targetKeychain.genericPassword(service: "svc", account: "guarded") == nil)
        #expect(try targetKeychain.internetPassword(server: "example.com", account: "u")?.port == 443)
        #expect(try targetKeychain.importBackup(from: file, password: Data("backup pw".utf8)) == 0)
    }

    @Test(.embeddedOnly("runs lactl on the store's directory"))
    func lactlSaysWhatABackupLeavesBehindAndWhatAnImportDidNotAdd() throws {
        let store = TestStore()
        let keychain = Keychain(client: try store.client(groups: ["app"]))
        try keychain.add(GenericPassword(service: "s", account: "migrates", password: Data("m".utf8)))
        try keychain.add(
            GenericPassword(
                service: "s", account: "stays", password: Data("d".utf8), accessibility: .whenUnlockedThisDeviceOnly))
        try store.with(try store.client(groups: ["app"])) {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            #expect(
                addGenericPassword(account: "guarded", extra: [kSecAttrAccessControl as String: access])
                    == errSecSuccess)
            // An enclave key with no list: its handle is sealed to this machine, so it stays too.
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("machine".utf8),
                ],
            ]
            #expect(SecKeyCreateRandomKey(parameters as CFDictionary, nil) != nil)
        }
        let file = store.directory.deletingLastPathComponent().appendingPathComponent("backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let lactl = try lactlExecutable()
        func run(_ command: String, _ extra: [String] = []) throws -> (status: Int32, output: String) {
            try runCapturingOutput(
                lactl, ["keychain", command, "--data-dir", store.directory.path] + extra + [file.path],
                environment: inheritedEnvironment(merging: ["LA_DAEMON_SOCKET": ""]), input: "backup pw\n")
        }

        let export = try run("export")
        #expect(export.status == 0, "\(export.output)")
        #expect(export.output.contains("exported 1 item to \(file.path)"), "\(export.output)")
        #expect(export.output.contains("3 items stayed behind"), "\(export.output)")
        #expect(!export.output.contains("backup pw"))

        // The exported item is there already: nothing is added, and the import says so.
        let again = try run("import")
        #expect(again.status == 0, "\(again.output)")
        #expect(again.output.contains("imported 0 items from \(file.path)"), "\(again.output)")
        #expect(again.output.contains("not added: 1 item of the backup"), "\(again.output)")
    }
}

@Suite("Typed keychain API")
struct TypedAPITests {
    @Test func genericPasswordsThroughTheTypedAPI() throws {
        let store = TestStore()
        let keychain = Keychain(client: try store.client(groups: ["app"]))
        try keychain.add(GenericPassword(service: "mail", account: "ann", password: Data("one".utf8), label: "Mail"))
        #expect(throws: KeychainError(status: errSecDuplicateItem)) {
            try keychain.add(GenericPassword(service: "mail", account: "ann", password: Data("two".utf8)))
        }
        let found = try #require(try keychain.genericPassword(service: "mail", account: "ann"))
        #expect(found.password == Data("one".utf8) && found.label == "Mail" && found.accessGroup == "app")
        #expect(found.creationDate != nil)
        try keychain.update(.genericPasswords(service: "mail", account: "ann"), setting: .data(Data("three".utf8)))
        #expect(try keychain.genericPassword(service: "mail", account: "ann")?.password == Data("three".utf8))
        try keychain.delete(.genericPasswords(service: "mail"))
        #expect(try keychain.genericPassword(service: "mail", account: "ann") == nil)
        do {
            try keychain.delete(.genericPasswords(service: "mail"))
            Issue.record("deleting nothing succeeded")
        } catch KeychainError.Code.itemNotFound {
        }
    }

    @Test func keysAndTheSameItemsThroughSecItem() throws {
        let store = TestStore()
        let client = try store.passcodeClient(groups: ["app"])
        let keychain = Keychain(client: client)
        try keychain.add(
            KeychainKey(
                keyClass: .private, keyType: "73", sizeInBits: 256, applicationTag: Data("com.example.key".utf8),
                keyData: Data(repeating: 4, count: 97)))
        let keys = try keychain.items(matching: .keys(applicationTag: Data("com.example.key".utf8)))
        #expect(keys.count == 1 && keys.first?.keyData.count == 97 && keys.first?.keyClass == .private)
        try store.with(client) {
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("com.example.key".utf8),
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrKeySizeInBits as String] as? Int == 256)
        }
    }
}

@Suite("Keychain through the protocol codec")
struct ProtocolRoundTripTests {
    /// Whatever `LA_PROTOCOL_ROUNDTRIP` says: requests, responses, statuses and events through their encodings.
    @Test(
        .embeddedOnly("compares embedded clients with and without the codec; over the daemon every message crosses it"))
    func aClientThatRoundTripsEveryMessageServesTheKeychainAsOneThatDoesNot() async throws {
        let store = TestStore()
        let plain = try store.client(groups: ["app"])
        let embedded = try #require(plain as? EmbeddedClient)
        let client = EmbeddedClient(engine: embedded.engine, caller: embedded.caller, roundTripsMessages: true)
        let keychain = Keychain(client: client)
        var events = try keychain.events().makeAsyncIterator()
        try keychain.add(GenericPassword(service: "s", account: "a", password: Data("secret".utf8)))
        try keychain.update(.genericPasswords(service: "s", account: "a"), setting: .label("l"))
        #expect(try keychain.genericPassword(service: "s", account: "a")?.password == Data("secret".utf8))
        #expect(try Keychain(client: plain).genericPassword(service: "s", account: "a")?.label == "l")
        #expect(throws: KeychainError.self) {
            try keychain.add(GenericPassword(service: "s", account: "a", password: Data()))
        }
        try store.with(client) {
            #expect(password(account: "a", service: "s") == .success("secret"))
            #expect(password(account: "missing") == .failure(StatusError(status: errSecItemNotFound)))
        }
        let file = store.directory.deletingLastPathComponent().appendingPathComponent("backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try keychain.exportBackup(to: file, password: Data("pw".utf8)) == 1)
        try keychain.delete(.genericPasswords(service: "s"))
        #expect(try keychain.importBackup(from: file, password: Data("pw".utf8)) == 1)
        var kinds: [KeychainEvent.Kind] = []
        for _ in 0..<4 { if let event = await events.next() { kinds.append(event.kind) } }
        #expect(kinds == [.added, .updated, .deleted, .added])
    }
}
