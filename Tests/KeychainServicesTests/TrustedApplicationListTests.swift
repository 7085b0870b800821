import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SwiftKeychain
import Synchronization
import Testing

/// `kSecAttrAccess` through Apple's macOS calls (`SecAccessCreate`, `SecTrustedApplicationCreateFromPath`), in
/// both modes: the program that lists itself uses the item without a question; for a program the list does not
/// name the presenter is asked, and an allow counts only after the passcode, checked through PAM.
@Suite("Keychain Services: trusted applications (kSecAttrAccess)", .serialized)
struct TrustedApplicationListTests {
    /// Answers "wants to use" questions from a script (none left: cancel) and passcode questions with `passcode`.
    final class Confirmations: EvaluationPresenter {
        private let choices: Mutex<[TrustChoice?]>
        private let asked = Mutex<[TrustPrompt]>([])
        let passcodeAnswer: String?

        init(_ choices: [TrustChoice?], passcode: String? = "secret") {
            self.choices = Mutex(choices)
            passcodeAnswer = passcode
        }

        var prompts: [TrustPrompt] { asked.withLock { $0 } }

        func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void)
        {
            respond(.fallback)
        }
        func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
        func fingerprintPromptDidEnd() {}
        func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
            passcodeAnswer.map { SecureBytes(Array($0.utf8)) }
        }
        func show(_ message: PasscodeMessage) {}
        func confirm(_ prompt: TrustPrompt) -> TrustChoice? {
            asked.withLock { $0.append(prompt) }
            return choices.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        }
    }

    static func access(trusting paths: [String?]) throws -> SecAccess {
        var applications: [SecTrustedApplication] = []
        for path in paths {
            var application: SecTrustedApplication?
            let status =
                path.map { SecTrustedApplicationCreateFromPath($0, &application) }
                ?? SecTrustedApplicationCreateFromPath(nil, &application)
            #expect(status == errSecSuccess)
            applications.append(try #require(application))
        }
        var access: SecAccess?
        #expect(SecAccessCreate("test item" as CFString, applications as CFArray, &access) == errSecSuccess)
        return try #require(access)
    }

    /// Adds account `account` with `access`, through a client whose presenter is `presenter`.
    func withItem(
        _ account: String, access: SecAccess, presenter: Confirmations, _ body: (TestStore) throws -> Void
    ) throws {
        let store = TestStore()
        try store.with(try store.passcodeClient(presenter: presenter)) {
            #expect(addGenericPassword(account: account, password: "p", extra: [kSecAttrAccess as String: access]) == 0)
            try body(store)
        }
    }

    /// An unregistered program's identifier, which trusted-application lists keep, is spelled as it always was
    /// (lowercase hex of the executable's digest), whatever produces it.
    @Test func anUnregisteredProgramsIdentifierIsItsDigestInLowercaseHex() {
        let digest = Data((0...31).map { UInt8($0 * 8 + 7) })
        #expect(
            TrustedApplication.unregisteredIdentifier(digest)
                == "unregistered." + digest.map { String(format: "%02x", $0) }.joined())
        #expect(TrustedApplication.unregisteredIdentifier(Data([0x00, 0xAB, 0xFF])) == "unregistered.00abff")
    }

    @Test func theProgramThatListsItselfUsesTheItemWithoutAQuestion() throws {
        let presenter = Confirmations([])
        try withItem("mine", access: try Self.access(trusting: [nil]), presenter: presenter) { _ in
            #expect(password(account: "mine") == .success("p"))
            #expect(presenter.prompts.isEmpty)
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "mine",
                kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            let stored = try #require((result as? [String: Any])?[kSecAttrAccess as String] as? SecAccess)
            #expect(stored.descriptor == "test item")
            let own = try #require(TrustedApplication.reading("/proc/self/exe"))
            #expect(stored.trustedApplications.map(\.codeDigest) == [own.codeDigest])
            #expect(stored.trustedApplications.map(\.path) == [own.executable])
            #expect(stored.trustedApplications.first?.applicationIdentifier.isEmpty == false)
            #expect(CFGetTypeID(stored) == SecAccessGetTypeID())
        }
    }

    @Test func anotherProgramsItemIsAskedForAndAnAllowNeedsThePasscode() throws {
        let presenter = Confirmations([.deny, nil, .allowOnce, .allowOnce, .alwaysAllow])
        let access = try Self.access(trusting: ["/bin/true"])
        try withItem("theirs", access: access, presenter: presenter) { store in
            // Attributes are not guarded.
            #expect(genericPasswordCount([kSecAttrAccount as String: "theirs"]) == 1)
            #expect(presenter.prompts.isEmpty)
            #expect(password(account: "theirs") == .failure(StatusError(status: errSecAuthFailed)), "Deny")
            #expect(password(account: "theirs") == .failure(StatusError(status: errSecUserCanceled)), "cancelled")
            #expect(password(account: "theirs") == .success("p"), "Allow once, then the passcode")
            #expect(password(account: "theirs") == .success("p"), "asked again: once is once")
            #expect(presenter.prompts.count == 4)
            #expect(
                presenter.prompts.allSatisfy { $0.item == "svc" && !$0.changed && $0.text.contains("wants to use") })
            #expect(password(account: "theirs") == .success("p"), "Always allow")
            #expect(password(account: "theirs") == .success("p"))
            #expect(presenter.prompts.count == 5, "not asked after Always allow")

            // Without a presenter, or when the request may not ask, nothing is released.
            try store.with(try store.passcodeClient(presenter: Confirmations([]))) {
                #expect(password(account: "theirs") == .success("p"), "this program is on the list now")
            }
        }
    }

    @Test func anAllowWithAWrongPasscodeOrNoWayToAskReleasesNothing() throws {
        let presenter = Confirmations([.alwaysAllow], passcode: "wrong")
        try withItem("guarded", access: try Self.access(trusting: []), presenter: presenter) { store in
            #expect(password(account: "guarded") == .failure(StatusError(status: errSecAuthFailed)))
            #expect(presenter.prompts.count == 1)
            #expect(
                password(account: "guarded", extra: [kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail])
                    == .failure(StatusError(status: errSecInteractionNotAllowed)))
            #expect(
                password(account: "guarded", extra: [kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip])
                    == .failure(StatusError(status: errSecItemNotFound)))
            #expect(presenter.prompts.count == 1, "neither asked")
            // Updating and deleting are guarded too: cancelled, nothing changes.
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
            ]
            #expect(
                SecItemUpdate(query as CFDictionary, [kSecValueData as String: Data("x".utf8)] as CFDictionary)
                    == errSecUserCanceled)
            #expect(SecItemDelete(query as CFDictionary) == errSecUserCanceled)
            #expect(genericPasswordCount([kSecAttrAccount as String: "guarded"]) == 1)
        }
    }

    /// A list entry for this program's path with other code: this program is asked as one that changed, and Always
    /// allow replaces the old entry.
    @Test func aListedProgramWhoseCodeChangedIsAskedWhetherItChanged() throws {
        let own = try #require(TrustedApplication.reading("/proc/self/exe"))
        let earlier = TrustedApplication(
            applicationIdentifier: "", executable: own.executable, codeDigest: Data(repeating: 7, count: 32))
        let access = SecAccess(ItemAccess(descriptor: "d", applications: [earlier]))
        let presenter = Confirmations([.alwaysAllow])
        try withItem("changed", access: access, presenter: presenter) { _ in
            #expect(password(account: "changed") == .success("p"))
            #expect(presenter.prompts.map(\.changed) == [true])
            #expect(presenter.prompts.first?.text.contains("has changed") == true)
            let (_, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "changed",
                kSecReturnAttributes as String: true,
            ])
            let stored = (result as? [String: Any])?[kSecAttrAccess as String] as? SecAccess
            #expect(stored?.trustedApplications.map(\.codeDigest) == [own.codeDigest], "the old code is off the list")
        }
    }

    @Test func badUseOfKSecAttrAccessIsRefused() throws {
        let store = TestStore()
        try store.with(try store.passcodeClient(presenter: Confirmations([]))) {
            let access = try Self.access(trusting: [nil])
            let control = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            #expect(
                addGenericPassword(
                    account: "both",
                    extra: [kSecAttrAccess as String: access, kSecAttrAccessControl as String: control])
                    == errSecParam)
            #expect(addGenericPassword(account: "one", extra: [kSecAttrAccess as String: access]) == errSecSuccess)
            let (status, _) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccess as String: access,
            ])
            #expect(status == errSecParam, "a list is not something to match")
            var missing: SecTrustedApplication?
            #expect(SecTrustedApplicationCreateFromPath("/no/such/program", &missing) == errSecItemNotFound)
            var access2: SecAccess?
            #expect(SecAccessCreate("d" as CFString, ["not an app"] as CFArray, &access2) == errSecParam)
        }
    }

    /// The typed API: `trustedApplications` on a password, `.thisProgram` or an executable by path.
    @Test func theTypedAPIListsTrustedApplications() throws {
        let store = TestStore()
        let presenter = Confirmations([.deny])
        let keychain = Keychain(client: try store.passcodeClient(presenter: presenter))
        try keychain.add(
            GenericPassword(
                service: "typed", account: "mine", password: Data("m".utf8), trustedApplications: [.thisProgram]))
        let mine = try #require(try keychain.genericPassword(service: "typed", account: "mine"))
        #expect(mine.password == Data("m".utf8))
        let own = try #require(TrustedApplication.reading("/proc/self/exe"))
        #expect(mine.trustedApplications?.map(\.codeDigest) == [own.codeDigest])

        let other = try #require(KeychainTrustedApplication(executableAt: "/bin/true"))
        try keychain.add(
            GenericPassword(service: "typed", account: "theirs", password: Data("t".utf8), trustedApplications: [other])
        )
        #expect(throws: KeychainError.self) { try keychain.genericPassword(service: "typed", account: "theirs") }
        #expect(presenter.prompts.map(\.item) == ["typed"])
        #expect(KeychainTrustedApplication(executableAt: "/no/such/program") == nil)
    }
}
