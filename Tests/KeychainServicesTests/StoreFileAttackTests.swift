import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import SecurityServer
import SwiftKeychain
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The attack review's findings about the lock, the store's files and "passcode set" (issue "Fixes from an attack
/// review", findings 4, 10 and 11), tried against real files and a real PAM stack (pam_matrix).
@Suite("Attack review: lock state and store files")
struct StoreFileAttackTests {
    /// Finding 4: `Keychain.default.unlock()` asked nothing. Now it is a passcode check through PAM.
    @Test func unlockingTheKeychainNeedsThePasscode() throws {
        let store = TestStore()
        let setup = try store.passcodeClient()
        try store.with(setup) { addGenericPassword(account: "ak") }
        try Keychain(client: setup).lock()

        for (answers, status) in [([nil], errSecUserCanceled), (["wrong"], errSecAuthFailed)] as [([String?], OSStatus)]
        {
            let client = try store.passcodeClient(presenter: PasscodeAnswers(answers))
            #expect(throws: KeychainError(status: status)) { try Keychain(client: client).unlock() }
            #expect(try Keychain(client: client).isLocked)
            try store.with(client) {
                #expect(password(account: "ak") == .failure(StatusError(status: errSecInteractionNotAllowed)))
            }
        }
        // Nobody to ask: not interactive, still locked.
        let silent = try store.client()
        #expect(throws: KeychainError(status: errSecInteractionNotAllowed)) { try Keychain(client: silent).unlock() }
        #expect(try Keychain(client: silent).isLocked)

        let owner = try store.passcodeClient(presenter: PasscodeAnswers("secret"))
        try Keychain(client: owner).unlock()
        try store.with(owner) { #expect(password(account: "ak") == .success("secret")) }
    }

    /// Finding 4: a `keybag.state` that did not decode counted as unlocked. Damaged or missing, it means locked.
    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func aDamagedOrMissingLockStateMeansLocked() throws {
        for damage in ["garbage", "delete"] {
            let store = TestStore()
            let client = try store.client()
            try store.with(client) { addGenericPassword(account: "ak") }
            let state = store.directory.appendingPathComponent("keybag.state")
            if damage == "delete" {
                try FileManager.default.removeItem(at: state)
            } else {
                try Data("{\"locked\": fals".utf8).write(to: state)
            }
            try store.with(try store.client()) {
                #expect(
                    password(account: "ak") == .failure(StatusError(status: errSecInteractionNotAllowed)), "\(damage)")
            }
            // The engine already open sees it too.
            try store.with(client) {
                #expect(
                    password(account: "ak") == .failure(StatusError(status: errSecInteractionNotAllowed)), "\(damage)")
            }
        }
    }

    /// Finding 10: a world-readable, all-zero `device.key` was accepted (and left 0644); a missing one was silently
    /// made anew beside an existing keybag. Each is refused now, and the file is left as found.
    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func keyFilesAreTrustedOnlyWhenPrivateAndPresent() throws {
        let store = TestStore()
        try store.with(try store.client()) { addGenericPassword(account: "a") }
        let keyPath = store.directory.appendingPathComponent(rootKeyFileName).path
        let original = try Data(contentsOf: URL(fileURLWithPath: keyPath))

        if !testsRunOnTPM {
            // The TPM's sealed key is no secret without its TPM; the key itself must be private.
            chmod(keyPath, 0o644)
            #expect(throws: KeychainStatus.self) { _ = try store.client() }
            #expect(Self.mode(keyPath) == 0o644, "left as found, for the administrator")
            chmod(keyPath, 0o600)
        }

        try Data(count: 32).write(to: URL(fileURLWithPath: keyPath))
        chmod(keyPath, 0o600)
        #expect(throws: KeychainStatus.self) { _ = try store.client() }

        try FileManager.default.removeItem(atPath: keyPath)
        #expect(throws: KeychainStatus.self) { _ = try store.client() }
        #expect(!FileManager.default.fileExists(atPath: keyPath), "no new root key beside the keybag")

        try original.write(to: URL(fileURLWithPath: keyPath))
        chmod(keyPath, 0o600)
        try store.with(try store.client()) { #expect(password(account: "a") == .success("secret")) }
    }

    /// Finding 10: temporary files had predictable names and were opened without `O_EXCL`/`O_NOFOLLOW`, so a
    /// planted link was written through. Links at every name the old code used stay untouched now.
    @Test(.embeddedOnly("rewrites the files of a store under an engine this process opens again"))
    func plantedLinksBesideStoreFilesAreNeverWrittenThrough() throws {
        let store = TestStore()
        let client = try store.passcodeClient()
        try store.with(client) { addGenericPassword(account: "a") }
        let victim = store.directory.path + "-victim"
        try Data("victim".utf8).write(to: URL(fileURLWithPath: victim))
        defer { try? FileManager.default.removeItem(atPath: victim) }
        let pid = getpid()
        for name in ["keybag.state.\(pid).tmp", "keybag.\(pid).tmp", ".keybag.state.tmp"] {
            symlink(victim, store.directory.appendingPathComponent(name).path)
        }
        try Keychain(client: client).lock()
        try Keychain(client: client).unlock()
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("victim".utf8))
        #expect(Self.mode(store.directory.appendingPathComponent("keybag.state").path) == 0o600)
    }

    /// Finding 11: `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly` items could never be added: "passcode set" was
    /// set only by tests. It follows the real state now: a PAM account that can authenticate.
    @Test(.embeddedOnly("compares an engine with no passcode service with one that has it, on two stores"))
    func passcodeOnlyItemsCanBeAddedWhenTheUserHasAPasscode() throws {
        let extra = [kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly]
        let withPasscode = TestStore()
        try withPasscode.with(try withPasscode.passcodeClient()) {
            #expect(addGenericPassword(account: "p", extra: extra) == errSecSuccess)
            #expect(password(account: "p") == .success("secret"))
        }
        // No PAM service that can authenticate the user: no passcode, Apple's status.
        let without = TestStore()
        try without.with(try without.client()) {
            #expect(addGenericPassword(account: "p", extra: extra) == errSecAuthFailed)
        }
    }

    private static func mode(_ path: String) -> mode_t {
        var info = stat()
        stat(path, &info)
        return info.st_mode & 0o777
    }
}
