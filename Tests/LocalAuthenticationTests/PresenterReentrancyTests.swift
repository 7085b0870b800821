import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient
import Synchronization
import TestSupport
import Testing

/// A presenter that calls the public API from inside its callbacks: `invalidate()` on the context being evaluated
/// when the fingerprint prompt begins, and `SecItemCopyMatching` when asked for the passcode (as a program that
/// reads its stored hint would).
final class ReentrantPresenter: AuthenticationPresenter, @unchecked Sendable {
    // Safe to share: `context` and `client` are set once before the evaluation starts; the readings are Mutexes.
    var context: LAContext?
    var client: (any SecurityClient)?
    let readBack = Mutex<OSStatus?>(nil)
    let protectedReadBack = Mutex<OSStatus?>(nil)

    func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {
        context?.invalidate()
    }

    func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? {
        KeychainClientSelection.$current.withValue(client) {
            let status = SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "hint",
                    kSecAttrService as String: "reentrancy", kSecReturnData as String: true,
                ] as CFDictionary, nil)
            readBack.withLock { $0 = status }
            // A protected item would need a second prompt while this one is answered: refused at once.
            let protected = SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
                    kSecAttrService as String: "reentrancy", kSecReturnData as String: true,
                ] as CFDictionary, nil)
            protectedReadBack.withLock { $0 = protected }
        }
        return AuthenticationSecret(copying: Array("secret".utf8))
    }
}

/// Issue "One message protocol", item 5: no deadlock is possible from a presenter calling the public API.
@Suite("Presenters calling the public API", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct PresenterReentrancyTests {
    @Test func aPresenterInvalidatingItsContextEndsTheFingerprintPrompt() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        try await world.run {
            let context = LAContext()
            let presenter = ReentrantPresenter()
            presenter.context = context
            context.presenter = presenter
            let code = await laErrorCode {
                try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "r")
            }
            #expect(code == .appCancel || code == .invalidContext)
        }
        await world.close()
    }

    @Test func aPresenterReadingTheKeychainWhileAskedForThePasscodeCompletes() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        try await world.run {
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "hint",
                        kSecAttrService as String: "reentrancy", kSecValueData as String: Data("hint".utf8),
                    ] as CFDictionary,
                    nil) == errSecSuccess)
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .devicePasscode, nil)!
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
                        kSecAttrService as String: "reentrancy", kSecAttrAccessControl as String: access,
                        kSecValueData as String: Data("guarded".utf8),
                    ] as CFDictionary, nil) == errSecSuccess)
            let context = LAContext()
            let presenter = ReentrantPresenter()
            presenter.client = world.client
            context.presenter = presenter
            let evaluated = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "r")
            #expect(evaluated)
            #expect(presenter.readBack.withLock { $0 } == errSecSuccess)
            #expect(presenter.protectedReadBack.withLock { $0 } == errSecInteractionNotAllowed)
        }
        await world.close()
    }
}
