import Foundation
import SecureCrypto
import TestSupport
import Testing

@testable import Enclave

@Suite("Enclave keybag")
struct EnclaveTests {
    private func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("enclave-\(UUID().uuidString)")
    }

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    /// A row's protection class read from its bytes: every class's raw value, and nothing else.
    @Test func aProtectionClassIsReadFromItsRawBytesAndNothingElse() {
        for protectionClass in ProtectionClass.allCases {
            let read = ProtectionClass(utf8: Data(protectionClass.rawValue.utf8).bytes)
            #expect(read == protectionClass)
        }
        let nearMisses = [
            "", "a", "k", "ak ", "akp", "akpx", "akuu", "bk", "Ak", "aK", "ck\u{0}", "dkpu", "ckpu", "akpuu", "ek",
        ]
        for other in nearMisses {
            let read = ProtectionClass(utf8: Data(other.utf8).bytes)
            #expect(read == nil, "\(other)")
        }
    }

    @Test func firstUseCreatesAPrivateRootKeyAndKeybag() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Enclave(directory: directory)
        #expect(try mode(directory.path) == 0o700)
        for file in ["device.key", "keybag", "keybag.state"] {
            #expect(try mode(directory.appendingPathComponent(file).path) == 0o600, "\(file)")
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("device.key")).count == 32)
    }

    /// A program killed while it creates a new store (here ended by the fault injection right after the keybag is
    /// written) leaves a store that opens unlocked: its state was written first. Before, the keybag came first, and
    /// a keybag without a state file counts as damage: the store stayed locked and every add failed
    /// (`errSecInteractionNotAllowed`), as a Secret Service test met when it stopped a provider during its first use.
    @Test func aProcessKilledWhileItCreatesTheStoreLeavesItUnlocked() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = inheritedEnvironment(merging: [
            "LA_DATA_DIR": directory.path, "LA_PRESENTER": "none", "LA_TEST_END_AFTER": "new-keybag",
        ])
        let lactl = try lactlExecutable()
        let killed = try runCapturingOutput(
            lactl, ["keychain", "add-generic-password", "-s", "svc", "-a", "acct", "-w", "pw"],
            environment: environment)
        #expect(killed.status == 75, "ended right after the keybag: \(killed.output)")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("keybag").path))
        #expect(try Enclave(directory: directory).isLocked == false)
        var again = environment
        again["LA_TEST_END_AFTER"] = nil
        let added = try runCapturingOutput(
            lactl, ["keychain", "add-generic-password", "-s", "svc", "-a", "acct", "-w", "pw"], environment: again)
        #expect(added.status == 0, "\(added.output)")
    }

    @Test func reopeningGivesTheSameKeys() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try Enclave(directory: directory)
        let second = try Enclave(directory: directory)
        #expect(first.metadataKey == second.metadataKey)
        #expect(first.indexKey == second.indexKey)
        #expect(first.metadataKey != first.indexKey)
    }

    @Test func lockingRemovesWhenUnlockedClassesButKeepsAfterFirstUnlockAndAlways() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let enclave = try Enclave(directory: directory)
        #expect(enclave.isAvailable(.whenUnlocked))
        try enclave.lock()
        #expect(enclave.isLocked)
        #expect(!enclave.isAvailable(.whenUnlocked))
        #expect(!enclave.isAvailable(.whenUnlockedThisDeviceOnly))
        #expect(enclave.isAvailable(.afterFirstUnlock))
        #expect(enclave.isAvailable(.afterFirstUnlockThisDeviceOnly))
        #expect(enclave.isAvailable(.always))
        #expect(enclave.isAvailable(.alwaysThisDeviceOnly))
        #expect(throws: EnclaveError.self) {
            try enclave.wrap(rowKey: .init(zeros: 32), protectionClass: .whenUnlocked, binding: Data())
        }
        try enclave.unlock()
        #expect(enclave.isAvailable(.whenUnlocked))
    }

    @Test func anotherInstanceSeesTheLock() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try Enclave(directory: directory)
        let second = try Enclave(directory: directory)
        try first.lock()
        #expect(!second.isAvailable(.whenUnlocked))
        try first.unlock()
        #expect(second.isAvailable(.whenUnlocked))
    }

    @Test func afterFirstUnlockNeedsAnUnlockInThisBoot() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Enclave(directory: directory)
        let state = directory.appendingPathComponent("keybag.state")
        try Data(#"{"locked":true,"unlockBootID":"an-earlier-boot","passcodeSet":false}"#.utf8).write(to: state)
        let enclave = try Enclave(directory: directory)
        #expect(!enclave.isAvailable(.afterFirstUnlock))
        #expect(enclave.isAvailable(.always))
        try enclave.unlock()
        try enclave.lock()
        #expect(enclave.isAvailable(.afterFirstUnlock))
    }

    @Test func passcodeClassNeedsAPasscode() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let enclave = try Enclave(directory: directory)
        #expect(!enclave.isAvailable(.whenPasscodeSetThisDeviceOnly))
        try enclave.setPasscodeSet(true)
        #expect(enclave.isAvailable(.whenPasscodeSetThisDeviceOnly))
    }

    @Test func rowKeysAreBoundToTheirRowAndClass() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let enclave = try Enclave(directory: directory)
        let key = try SecureBytesFactory.random()
        let wrapped = try enclave.wrap(rowKey: key, protectionClass: .whenUnlocked, binding: Data("row 1".utf8))
        #expect(try enclave.unwrap(rowKey: wrapped, protectionClass: .whenUnlocked, binding: Data("row 1".utf8)) == key)
        #expect(throws: EnclaveError.self) {
            try enclave.unwrap(rowKey: wrapped, protectionClass: .whenUnlocked, binding: Data("row 2".utf8))
        }
        #expect(throws: EnclaveError.self) {
            try enclave.unwrap(rowKey: wrapped, protectionClass: .always, binding: Data("row 1".utf8))
        }
    }

    @Test func aForeignDeviceKeyDoesNotOpenTheKeybag() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Enclave(directory: directory)
        try Data(repeating: 7, count: 32).write(to: directory.appendingPathComponent("device.key"))
        #expect(throws: EnclaveError.self) { try Enclave(directory: directory) }
    }

    @Test(arguments: [false, true])
    func aDestroyedPasscodeSetClassKeyOpensNoOldRowKey(protected: Bool) throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = EnclaveConfiguration.software
        configuration.unlockedKeys = .processMemory
        let enclave = try Enclave(directory: directory, configuration: configuration)
        let passcode = SecureBytes(Array("secret".utf8))
        if protected { try enclave.unlock(passcode: passcode) }
        try enclave.setPasscodeSet(true)
        let rowKey = try SecureBytes(randomCount: 32)
        let binding = Data("row 1".utf8)
        let wrapped = try enclave.wrap(
            rowKey: rowKey, protectionClass: .whenPasscodeSetThisDeviceOnly, binding: binding)
        let keybagBefore = try Data(contentsOf: directory.appendingPathComponent("keybag"))

        try enclave.destroyPasscodeSetClassKey()
        try enclave.setPasscodeSet(false)
        #expect(throws: EnclaveError.self) {
            try enclave.unwrap(rowKey: wrapped, protectionClass: .whenPasscodeSetThisDeviceOnly, binding: binding)
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("keybag")) != keybagBefore)

        // A passcode again (a new class key): a row key from before, say in a restored database, stays closed.
        if protected { try enclave.unlock(passcode: passcode) }
        try enclave.setPasscodeSet(true)
        #expect(enclave.isAvailable(.whenPasscodeSetThisDeviceOnly))
        #expect(throws: EnclaveError.self) {
            try enclave.unwrap(rowKey: wrapped, protectionClass: .whenPasscodeSetThisDeviceOnly, binding: binding)
        }
        let fresh = try enclave.wrap(rowKey: rowKey, protectionClass: .whenPasscodeSetThisDeviceOnly, binding: binding)
        let reopened = try Enclave(directory: directory, configuration: configuration)
        if protected { try reopened.unlock(passcode: passcode) }
        #expect(
            try reopened.unwrap(rowKey: fresh, protectionClass: .whenPasscodeSetThisDeviceOnly, binding: binding)
                == rowKey)
    }
}
