import Authenticators
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import Testing

/// A passcode presenter that, on each question, says it was asked and then waits until released (as a user finding
/// their passcode would), then answers `secret`.
final class GatedPasscode: EvaluationPresenter {
    private let asked = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    /// Waits up to `seconds` for a question; whether one came.
    func waitUntilAsked(seconds: Double) -> Bool { asked.wait(timeout: .now() + seconds) == .success }
    func release() { released.signal() }

    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        respond(.cancel)
    }
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        asked.signal()
        guard released.wait(timeout: .now() + 60) == .success else { return nil }
        return SecureBytes(Array("secret".utf8))
    }
    func show(_ message: PasscodeMessage) {}
}

/// Issue "One message protocol", item 4: a keychain prompt runs with no database transaction open, so the user's
/// time to answer holds no SQLite lock that another process would wait on.
@Suite("Keychain prompts outside transactions", .serialized)
struct PromptOutsideTransactionTests {
    /// Adds a userPresence-protected generic password `account` through `client`.
    func addProtected(_ store: TestStore, _ client: any SecurityClient, account: String) throws {
        try store.with(client) {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            #expect(
                addGenericPassword(account: account, extra: [kSecAttrAccessControl as String: access]) == errSecSuccess)
        }
    }

    /// The status of an operation running on another thread, once it returns.
    final class Outcome: Sendable {
        private let status = Mutex<OSStatus?>(nil)

        func finish(_ value: OSStatus) { status.withLock { $0 = value } }

        /// The status, waiting up to `seconds` for it.
        func wait(seconds: Double) -> OSStatus? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let value = status.withLock({ $0 }) { return value }
                usleep(10_000)
            }
            return status.withLock { $0 }
        }
    }

    /// Starts `SecItemUpdate` of `account` on its own thread.
    func startUpdate(_ store: TestStore, _ client: any SecurityClient, account: String, to value: String) -> Outcome {
        let outcome = Outcome()
        Thread {
            let result = try? store.with(client) {
                SecItemUpdate(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                        kSecAttrService as String: "svc",
                    ] as CFDictionary,
                    [kSecValueData as String: Data(value.utf8)] as CFDictionary)
            }
            outcome.finish(result ?? -1)
        }.start()
        return outcome
    }

    @Test func aProtectedUpdateWaitingOnItsPromptBlocksNoOtherProcessesAdd() throws {
        let store = TestStore()
        let gate = GatedPasscode()
        let client = try store.passcodeClient(groups: ["stress"], presenter: gate)
        try addProtected(store, client, account: "guarded")
        let updated = startUpdate(store, client, account: "guarded", to: "new value")
        #expect(gate.waitUntilAsked(seconds: 20), "the update asks for the passcode")

        // Another process adds to the same store while the prompt is open; before this change it waited for
        // SQLite's write lock (held by the update for the whole prompt) until the busy timeout.
        let started = Date()
        let (other, output) = try startStress(store, prefix: "meanwhile", count: 3)
        let deadline = started.addingTimeInterval(20)
        while other.isRunning && Date() < deadline { usleep(10_000) }
        let finishedWhilePromptOpen = !other.isRunning
        let elapsed = Date().timeIntervalSince(started)
        gate.release()
        other.waitUntilExit()
        _ = output.fileHandleForReading.readDataToEndOfFile()
        #expect(finishedWhilePromptOpen, "the other process's adds completed while the prompt was still open")
        #expect(other.terminationStatus == 0)
        #expect(elapsed < 20)
        #expect(updated.wait(seconds: 20) == errSecSuccess)
        try store.with(try store.passcodeClient(groups: ["stress"])) {
            #expect(password(account: "guarded") == .success("new value"))
            #expect(password(account: "meanwhile-2", service: "stress") == .success("meanwhile-2"))
        }
    }

    /// The update authorized the row as it was; deleted meanwhile by another client, it is not written back.
    @Test func anItemDeletedWhileItsUpdateWasAuthorizedStaysDeleted() throws {
        let store = TestStore()
        let gate = GatedPasscode()
        let client = try store.passcodeClient(groups: ["stress"], presenter: gate)
        try addProtected(store, client, account: "guarded")
        let updated = startUpdate(store, client, account: "guarded", to: "new value")
        #expect(gate.waitUntilAsked(seconds: 20))
        try store.with(groups: ["stress"]) {
            #expect(
                SecItemDelete(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded"]
                        as CFDictionary)
                    == errSecSuccess)
        }
        gate.release()
        #expect(updated.wait(seconds: 20) == errSecItemNotFound)
        try store.with(groups: ["stress"]) { #expect(genericPasswordCount() == 0) }
    }
}
