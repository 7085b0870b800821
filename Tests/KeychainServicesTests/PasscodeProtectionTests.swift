import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import SwiftKeychain
import TestSupport
import Testing

/// Locked means locked (issue "Locked means locked"): from its first unlock by passcode, a store's
/// `ak`/`aku`/`akpu`/`ck`/`cku` keys are sealed under the passcode and the device root key, and kept unlocked only
/// outside the store directory (the kernel keyring, or localauthd's memory). Tried as an attacker holding the
/// store directory would: rewriting or deleting the state files, opening the store in a fresh process.
@Suite("Locked means locked: class keys under the passcode")
struct PasscodeProtectionTests {
    static let markers = ["ak": "ak-marker-5c1e", "ck": "ck-marker-5c1e", "dk": "dk-marker-5c1e"]

    /// Adds one item per class, unlocks by passcode (which protects the store), locks.
    func lockedProtectedStore() throws -> TestStore {
        let store = TestStore()
        let owner = try store.passcodeClient()
        try store.with(owner) {
            for (protection, marker) in Self.markers {
                #expect(
                    addGenericPassword(
                        account: protection, password: marker, extra: [kSecAttrAccessible as String: protection])
                        == errSecSuccess)
            }
        }
        try Keychain(client: owner).unlock()
        try Keychain(client: owner).lock()
        return store
    }

    @Test(.embeddedOnly("copies and rewrites the store directory, and reads it in fresh processes"))
    func aCopiedLockedStoreWithRewrittenStateGivesNoPasscodeClassItem() throws {
        let store = try lockedProtectedStore()
        let keybag = try Data(contentsOf: store.directory.appendingPathComponent("keybag"))
        #expect(keybag.prefix(5) == Data("LAKB3".utf8))
        #expect(keybag.range(of: Data("passcode-kdf".utf8)) != nil)

        let lactl = try lactlExecutable()
        var environment = inheritedEnvironment()
        environment["LA_DAEMON_SOCKET"] = ""
        func find(_ account: String, in directory: URL) throws -> (status: Int32, output: String) {
            try runCapturingOutput(
                lactl,
                ["keychain", "find-generic-password", "--data-dir", directory.path, "-s", "svc", "-a", account, "-w"],
                environment: environment)
        }
        let bootID = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        for attack in ["rewrite", "delete"] {
            let copy = URL(fileURLWithPath: store.directory.path + "-copy-\(attack)")
            try? FileManager.default.removeItem(at: copy)
            try FileManager.default.copyItem(at: store.directory, to: copy)
            defer { try? FileManager.default.removeItem(at: copy) }
            let state = copy.appendingPathComponent("keybag.state")
            if attack == "delete" {
                try FileManager.default.removeItem(at: state)
            } else {
                try Data("{\"locked\":false,\"unlockBootID\":\"\(bootID)\",\"passcodeSet\":true}".utf8).write(to: state)
            }
            for account in ["ak", "ck"] {
                let stolen = try find(account, in: copy)
                #expect(stolen.status != 0, "\(attack) \(account): \(stolen.output)")
                #expect(!stolen.output.contains(Self.markers[account]!), "\(attack) \(account)")
                #expect(
                    stolen.output.contains("User interaction is not allowed"), "\(attack) \(account): \(stolen.output)")
            }
            // Items that need no passcode open as before (servers, background jobs).
            let always = try find("dk", in: copy)
            #expect(always.status == 0 && always.output.contains(Self.markers["dk"]!), "\(always.output)")
        }

        // The store itself, its state rewritten to "unlocked": `ak` stays locked in a fresh process; `ck` stays
        // available until reboot (after the first unlock), as on Apple's devices.
        let state = store.directory.appendingPathComponent("keybag.state")
        try Data("{\"locked\":false,\"unlockBootID\":\"\(bootID)\",\"passcodeSet\":true}".utf8).write(to: state)
        let ak = try find("ak", in: store.directory)
        #expect(
            ak.status != 0 && !ak.output.contains(Self.markers["ak"]!)
                && ak.output.contains("User interaction is not allowed"), "\(ak.output)")
        let ck = try find("ck", in: store.directory)
        #expect(ck.status == 0 && ck.output.contains(Self.markers["ck"]!), "\(ck.output)")

        // No file of the store holds an item's plaintext or a passcode class key under the root key alone.
        for name in try FileManager.default.contentsOfDirectory(atPath: store.directory.path) {
            guard let bytes = FileManager.default.contents(atPath: store.directory.appendingPathComponent(name).path)
            else { continue }
            for marker in Self.markers.values {
                #expect(bytes.range(of: Data(marker.utf8)) == nil, "\(name) holds \(marker)")
            }
        }
        for protection in ["ak", "aku", "akpu", "ck", "cku"] {
            // An entry named by the class alone is one sealed under the root key only (see Enclave's keybag).
            var name = Data([UInt8(protection.utf8.count)]) + Data(protection.utf8)
            name.append(contentsOf: [0x00])  // the value's two-byte size starts with 0 for a 60-byte sealed key
            #expect(keybag.range(of: name) == nil, "the keybag holds \(protection) under the root key alone")
        }
    }

    @Test func thePasscodeUnlocksAgainAndAWrongOneDoesNot() throws {
        let store = try lockedProtectedStore()
        let wrong = try store.passcodeClient(presenter: PasscodeAnswers("wrong"))
        #expect(throws: KeychainError.self) { try Keychain(client: wrong).unlock() }
        try store.with(wrong) {
            #expect(password(account: "ak") == .failure(StatusError(status: errSecInteractionNotAllowed)))
        }
        let owner = try store.passcodeClient()
        try Keychain(client: owner).unlock()
        // Another engine on the same store (another process, embedded) sees the unlock too.
        try store.with(try store.client()) {
            #expect(password(account: "ak") == .success(Self.markers["ak"]!))
            #expect(password(account: "ck") == .success(Self.markers["ck"]!))
        }
        try Keychain(client: owner).lock()
        try store.with(try store.client()) {
            #expect(password(account: "ak") == .failure(StatusError(status: errSecInteractionNotAllowed)))
        }
    }

    @Test func aChangedPasscodeAsksOnceForThePreviousOneAndReseals() throws {
        let store = try lockedProtectedStore()
        // The account's passcode changed outside (passwd): PAM accepts only the new one now.
        try store.setPasscode("renewed")

        // The previous passcode is asked once; a wrong answer leaves the keychain locked and the unlock fails.
        let mistaken = PasscodeAnswers("renewed", "not the old one")
        #expect(throws: KeychainError.self) {
            try Keychain(client: try store.passcodeClient(presenter: mistaken)).unlock()
        }
        #expect(mistaken.questionCount == 2)
        try store.with(try store.client()) {
            #expect(password(account: "ak") == .failure(StatusError(status: errSecInteractionNotAllowed)))
        }
        // Cancelling the question leaves it locked too.
        let cancelling = PasscodeAnswers("renewed", nil)
        #expect(throws: KeychainError.self) {
            try Keychain(client: try store.passcodeClient(presenter: cancelling)).unlock()
        }
        #expect(cancelling.questionCount == 2)

        // The right previous passcode re-seals the keychain under the new one.
        let remembering = PasscodeAnswers("renewed", "secret")
        try Keychain(client: try store.passcodeClient(presenter: remembering)).unlock()
        #expect(remembering.questionCount == 2)
        try store.with(try store.client()) {
            #expect(password(account: "ak") == .success(Self.markers["ak"]!))
        }
        let owner = try store.passcodeClient(presenter: PasscodeAnswers("renewed"))
        try Keychain(client: owner).lock()
        let once = PasscodeAnswers("renewed")
        try Keychain(client: try store.passcodeClient(presenter: once)).unlock()
        #expect(once.questionCount == 1, "the new passcode alone opens it now")
        try store.with(try store.client()) {
            #expect(password(account: "ak") == .success(Self.markers["ak"]!))
        }

        // An explicit unlock while unlocked checks the sealing too (`lactl passcode changed` on demand).
        try store.setPasscode("third")
        let onDemand = PasscodeAnswers("third", "renewed")
        try Keychain(client: try store.passcodeClient(presenter: onDemand)).unlock()
        #expect(onDemand.questionCount == 2)
        try Keychain(client: try store.passcodeClient(presenter: PasscodeAnswers("third"))).lock()
        try Keychain(client: try store.passcodeClient(presenter: PasscodeAnswers("third"))).unlock()
    }

    @Test func anAccountThatCanNoLongerAuthenticateLosesItsPasscodeSetItems() async throws {
        let store = TestStore()
        let owner = try store.passcodeClient()
        try Keychain(client: owner).unlock()
        try store.with(owner) {
            #expect(
                addGenericPassword(
                    account: "akpu", password: "akpu-marker-5c1e",
                    extra: [kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly])
                    == errSecSuccess)
            #expect(addGenericPassword(account: "ak", password: "ak-marker-5c1e") == errSecSuccess)
        }
        let keybag = store.storeDirectory.appendingPathComponent("keybag")
        #expect(try Data(contentsOf: keybag).range(of: Data("pc:akpu".utf8)) != nil)

        // The account is gone from PAM: the next availability check notices, and the akpu class goes for good.
        try store.setPasscode(nil)
        guard case .context(let id) = try await owner.send(.createContext),
            case .availability(let availability) = try await owner.send(.canEvaluatePolicy(.passcode, id))
        else {
            Issue.record("no availability")
            return
        }
        #expect(availability.error?.code == .passcodeNotSet)
        #expect(try Data(contentsOf: keybag).range(of: Data("pc:akpu".utf8)) == nil, "the akpu key is still sealed")
        try store.with(try store.client()) {
            #expect(password(account: "akpu") == .failure(StatusError(status: errSecItemNotFound)))
            #expect(password(account: "ak") == .success("ak-marker-5c1e"))
            // Without a passcode the class takes no new item (Apple: errSecAuthFailed).
            #expect(
                addGenericPassword(
                    account: "akpu-2",
                    extra: [kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly])
                    == errSecAuthFailed)
        }

        // A passcode again: the next unlock makes a new akpu key, and the class works as before.
        try store.setPasscode("secret")
        try Keychain(client: try store.passcodeClient()).unlock()
        #expect(try Data(contentsOf: keybag).range(of: Data("pc:akpu".utf8)) != nil)
        try store.with(try store.passcodeClient()) {
            #expect(
                addGenericPassword(
                    account: "akpu", password: "akpu-again",
                    extra: [kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly])
                    == errSecSuccess)
            #expect(password(account: "akpu") == .success("akpu-again"))
        }
    }

    @Test(.embeddedOnly("puts a store written by the previous release into a directory and opens it in this process"))
    func aStoreFromBeforeThePasscodeLayerMigratesOnItsFirstUnlockKeepingEveryItem() throws {
        // Written by the release before passcode-sealed class keys (keybag version 2): see Fixtures/README.md.
        let store = TestStore()
        let fixture = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
            .appendingPathComponent("store-before-passcode")
        try FileManager.default.createDirectory(at: store.directory, withIntermediateDirectories: true)
        for name in ["device.key", "keybag", "keybag.state", "keychain.db", "attempts.state"] {
            let target = store.directory.appendingPathComponent(name)
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(name), to: target)
            chmod(target.path, 0o600)
        }
        chmod(store.directory.path, 0o700)
        let classes = ["ak", "aku", "akpu", "ck", "cku", "dk", "dku"]
        let groups = ["local.make-fixture"]
        func read(_ account: String) -> Result<String, StatusError> {
            password(account: account, service: "fixture")
        }

        // Opened as it is: every item reads, the keybag is re-sealed as version 3 but not under a passcode yet.
        try store.with(try store.client(groups: groups)) {
            for account in classes { #expect(read(account) == .success("\(account)-value-7d3a"), "\(account)") }
        }
        let keybag = store.directory.appendingPathComponent("keybag")
        #expect(try Data(contentsOf: keybag).prefix(5) == Data("LAKB3".utf8))
        #expect(try Data(contentsOf: keybag).range(of: Data("passcode-kdf".utf8)) == nil)
        #expect(try store.client(groups: groups).sendBlocking(.sealingState) == .sealedUnderPasscode(false))

        // The first unlock by passcode seals the passcode classes under it, keeping every item.
        let owner = try store.passcodeClient(groups: groups)
        try Keychain(client: owner).unlock()
        let sealed = try Data(contentsOf: keybag)
        #expect(try store.client(groups: groups).sendBlocking(.sealingState) == .sealedUnderPasscode(true))
        #expect(sealed.range(of: Data("passcode-kdf".utf8)) != nil)
        for protection in ["ak", "aku", "akpu", "ck", "cku"] {
            #expect(sealed.range(of: Data("pc:\(protection)".utf8)) != nil, "\(protection)")
        }
        try store.with(try store.client(groups: groups)) {
            for account in classes { #expect(read(account) == .success("\(account)-value-7d3a"), "\(account)") }
        }

        // Locked: the WhenUnlocked classes are gone, the rest stays; the passcode brings everything back.
        try Keychain(client: owner).lock()
        try store.with(try store.client(groups: groups)) {
            for account in ["ak", "aku", "akpu"] {
                #expect(read(account) == .failure(StatusError(status: errSecInteractionNotAllowed)), "\(account)")
            }
            for account in ["ck", "cku", "dk", "dku"] { #expect(read(account) == .success("\(account)-value-7d3a")) }
        }
        try Keychain(client: try store.passcodeClient(groups: groups)).unlock()
        try store.with(try store.client(groups: groups)) {
            for account in classes { #expect(read(account) == .success("\(account)-value-7d3a"), "\(account)") }
        }
    }
}
