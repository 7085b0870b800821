import EmbeddedEngine
import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing

/// Adds a generic password guarded by `flags`, optionally with `context` (needed for `.applicationPassword`).
func addProtected(
    _ account: String, flags: SecAccessControlCreateFlags, value: String = "top secret", context: LAContext? = nil
) -> OSStatus {
    let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil)!
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: "acl-tests",
        kSecAttrAccount as String: account,
        kSecAttrAccessControl as String: access,
        kSecValueData as String: Data(value.utf8),
    ]
    if let context { query[kSecUseAuthenticationContext as String] = context }
    return SecItemAdd(query as CFDictionary, nil)
}

/// Reads a generic password's data: the status and the value as a string.
func readProtected(
    _ account: String, context: LAContext? = nil, ui: CFString? = nil
) -> (status: OSStatus, value: String?) {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: "acl-tests",
        kSecAttrAccount as String: account,
        kSecReturnData as String: true,
    ]
    if let context { query[kSecUseAuthenticationContext as String] = context }
    if let ui { query[kSecUseAuthenticationUI as String] = ui }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
}

@Suite("Access control on keychain items", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct AccessControlTests {
    @Test func protectedItemNeedsASatisfyingContextWhichThenReadsWithoutPrompting() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        try await world.run {
            #expect(addProtected("presence", flags: .userPresence) == errSecSuccess)
            // No context and nobody to prompt: as Apple without UI.
            #expect(readProtected("presence").status == errSecInteractionNotAllowed)
            let unevaluated = LAContext()
            unevaluated.presenter = ScriptedAuthenticationPresenter()
            #expect(
                readProtected("presence", context: unevaluated, ui: kSecUseAuthenticationUIFail).status
                    == errSecInteractionNotAllowed)
            #expect(
                readProtected("presence", context: unevaluated, ui: kSecUseAuthenticationUISkip).status
                    == errSecItemNotFound)
            unevaluated.interactionNotAllowed = true
            #expect(readProtected("presence", context: unevaluated).status == errSecInteractionNotAllowed)

            let presenter = ScriptedAuthenticationPresenter()
            let context = LAContext()
            context.presenter = presenter
            async let matched = context.evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics, localizedReason: "read the secret")
            try await world.scan("alice-1")
            #expect(try await matched)
            let promptsBefore = presenter.shownPrompts.count
            let read = readProtected("presence", context: context)
            #expect(read.status == errSecSuccess)
            #expect(read.value == "top secret")
            #expect(presenter.shownPrompts.count == promptsBefore)
            // Attributes stay readable without any authentication.
            var attributes: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "presence",
                kSecReturnAttributes as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &attributes) == errSecSuccess)
        }
        await world.close()
    }

    @Test func theEnginePromptsThroughTheContextsPresenterAndMapsLAErrors() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        try await world.run {
            #expect(addProtected("passcode", flags: .devicePasscode) == errSecSuccess)
            let presenter = ScriptedAuthenticationPresenter(passcodes: ["secret"])
            let context = LAContext()
            context.presenter = presenter
            context.localizedReason = "show the saved password"
            let read = readProtected("passcode", context: context)
            #expect(read.status == errSecSuccess)
            #expect(read.value == "top secret")
            #expect(presenter.askedQuestions.count == 1)
            #expect(presenter.shownPrompts.first?.reason == "show the saved password")
            // The credential now lives in the context: no second prompt.
            #expect(readProtected("passcode", context: context).status == errSecSuccess)
            #expect(presenter.askedQuestions.count == 1)

            let cancelling = LAContext()
            cancelling.presenter = ScriptedAuthenticationPresenter(passcodes: [nil])
            #expect(readProtected("passcode", context: cancelling).status == errSecUserCanceled)
            let wrong = LAContext()
            wrong.presenter = ScriptedAuthenticationPresenter(passcodes: ["guess"])
            #expect(readProtected("passcode", context: wrong).status == errSecAuthFailed)
            let invalidated = LAContext()
            invalidated.invalidate()
            #expect(readProtected("passcode", context: invalidated).status == errSecAuthFailed)
        }
        await world.close()
    }

    @Test func currentSetItemsDieWithAnEnrollmentChangeWhileAnyBiometryItemsLive() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        try await world.run {
            #expect(addProtected("current-set", flags: .biometryCurrentSet) == errSecSuccess)
            #expect(addProtected("any", flags: .biometryAny) == errSecSuccess)
            let before = LAContext()
            before.presenter = ScriptedAuthenticationPresenter()
            async let matched = before.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "r")
            try await world.scan("alice-1")
            #expect(try await matched)
            #expect(readProtected("current-set", context: before).value == "top secret")
            #expect(readProtected("any", context: before).value == "top secret")
        }
        // A finger numbered after the first one: on the fprintd pass the reader cannot identify, and fprintd then
        // verifies only the lowest-numbered enrolled finger (right index stays it).
        try await world.enroll("alice-2", finger: .rightMiddle)
        try await world.run {
            let after = LAContext()
            after.presenter = ScriptedAuthenticationPresenter()
            async let matched = after.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "r")
            try await world.scan("alice-1")
            #expect(try await matched)
            #expect(readProtected("any", context: after).value == "top secret")
            #expect(readProtected("current-set", context: after).status == errSecAuthFailed)
            // For good: the list stored with the item is bound to the old set, so no evaluation can satisfy it,
            // while a list made now binds nothing yet and is satisfied by the new set.
            var attributes: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "current-set",
                kSecReturnAttributes as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &attributes) == errSecSuccess)
            let stored = try #require(
                (attributes as? [String: Any])?[kSecAttrAccessControl as String] as? SecAccessControl)
            #expect(
                await laErrorCode {
                    try await after.evaluateAccessControl(stored, operation: .useItem, localizedReason: "r")
                } == .authenticationFailed)
            let fresh = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .biometryCurrentSet, nil)!
            let satisfied = try await after.evaluateAccessControl(fresh, operation: .useItem, localizedReason: "r")
            #expect(satisfied)
        }
        await world.close()
    }

    @Test func applicationPasswordItemsNeedTheCredential() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        try await world.run {
            let noCredential = LAContext()
            noCredential.presenter = nil
            #expect(addProtected("app", flags: .applicationPassword, context: noCredential) == errSecAuthFailed)
            let owner = LAContext()
            #expect(owner.setCredential(Data("hunter2".utf8), type: .applicationPassword))
            #expect(addProtected("app", flags: .applicationPassword, context: owner) == errSecSuccess)
            #expect(readProtected("app", context: owner).value == "top secret")
            #expect(readProtected("app").status == errSecInteractionNotAllowed)
            let stranger = LAContext()
            stranger.presenter = nil
            #expect(readProtected("app", context: stranger).status == errSecInteractionNotAllowed)
            #expect(stranger.setCredential(Data("wrong".utf8), type: .applicationPassword))
            #expect(readProtected("app", context: stranger).status == errSecAuthFailed)
            let friend = LAContext()
            #expect(friend.setCredential(Data("hunter2".utf8), type: .applicationPassword))
            #expect(readProtected("app", context: friend).value == "top secret")
            // Without a credential but with a presenter, the engine asks for the password and keeps it.
            let asking = ScriptedAuthenticationPresenter(passcodes: ["hunter2"])
            let prompted = LAContext()
            prompted.presenter = asking
            #expect(readProtected("app", context: prompted).value == "top secret")
            #expect(asking.askedQuestions.first?.isSecret == true)
            #expect(prompted.isCredentialSet(.applicationPassword))

            // Changing the list re-seals the data: without the password layer now, then with it again.
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl-tests",
                kSecAttrAccount as String: "app", kSecUseAuthenticationContext as String: friend,
            ]
            let plain = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil)!
            #expect(
                SecItemUpdate(item as CFDictionary, [kSecAttrAccessControl as String: plain] as CFDictionary)
                    == errSecSuccess)
            #expect(readProtected("app").value == "top secret")
            let again = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil)!
            #expect(
                SecItemUpdate(item as CFDictionary, [kSecAttrAccessControl as String: again] as CFDictionary)
                    == errSecSuccess)
            #expect(readProtected("app", context: friend).value == "top secret")
            #expect(readProtected("app", context: stranger).status == errSecAuthFailed)
        }
        await world.close()
    }

    @Test(.embeddedOnly("asks the engine's access-control evaluator directly"))
    func privateKeyUsageGuardsOnlyKeyOperationsAndAndNeedsEveryMethod() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let evaluator = ContextAccessControlEvaluator(contexts: world.contexts)
        let keyPolicy = AccessControlPolicy(protection: "ak", flags: 1 << 30 | 1 << 1)
        #expect(
            evaluator.authorize(
                keyPolicy, operation: .readData, authenticationUI: .fail, context: nil, prompting: .none) == .allowed)
        #expect(
            evaluator.authorize(
                keyPolicy, operation: .useKeySign, authenticationUI: .fail, context: nil, prompting: .none)
                == .denied(.interactionNotAllowed))
        let both = AccessControlPolicy(protection: "ak", flags: 1 << 15 | 1 << 1 | 1 << 4)
        try await world.run {
            let context = LAContext()
            context.presenter = ScriptedAuthenticationPresenter(passcodes: ["secret"])
            async let matched = context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "r")
            try await world.scan("alice-1")
            #expect(try await matched)
            let id = try context.authenticationContextID()
            for operation in [AccessControlOperation.useKeySign, .useKeyDecrypt, .useKeyKeyExchange] {
                #expect(
                    evaluator.authorize(
                        keyPolicy, operation: operation, authenticationUI: .fail, context: id, prompting: .none)
                        == .allowed)
            }
            #expect(
                evaluator.authorize(
                    both, operation: .useKeySign, authenticationUI: .fail, context: id, prompting: .none)
                    == .denied(.interactionNotAllowed))
            // Allowed to prompt: the engine asks for the missing passcode through the request's channel, which
            // reaches the context's presenter.
            let prompting = Prompting(
                options: context.keychainPromptOptions,
                channel: EmbeddedClient.promptChannel(to: context.keychainPresenter))
            #expect(
                evaluator.authorize(
                    both, operation: .useKeySign, authenticationUI: .allow, context: id, prompting: prompting)
                    == .allowed)
        }
        await world.close()
    }

    @Test func evaluateAccessControlLeavesACredentialTheKeychainAccepts() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        try await world.run {
            #expect(addProtected("passcode", flags: [.devicePasscode, .or, .biometryAny]) == errSecSuccess)
            let presenter = ScriptedAuthenticationPresenter(passcodes: ["secret"])
            let context = LAContext()
            context.presenter = presenter
            let access = SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlocked, [.devicePasscode, .or, .biometryAny], nil)!
            let evaluated = try await context.evaluateAccessControl(
                access, operation: .useItem, localizedReason: "read")
            #expect(evaluated)
            #expect(presenter.askedQuestions.count == 1)
            context.interactionNotAllowed = true
            #expect(readProtected("passcode", context: context).value == "top secret")
            #expect(presenter.askedQuestions.count == 1)
        }
        await world.close()
    }

    /// Attack review, finding 2: `SecItemUpdate` with a wrong application password replaced the value and the
    /// access control, so the owner later read the attacker's value. Apple's update decrypts the item under its
    /// current list first (kAKSKeyOpDecrypt, SecAccessControl.m); deleting needs no authentication there
    /// (kAKSKeyOpDelete is always allowed), and so it is here.
    @Test func updatingAPasswordItemNeedsItsPassword() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        try await world.run {
            let owner = LAContext()
            #expect(owner.setCredential(Data("hunter2".utf8), type: .applicationPassword))
            #expect(
                addProtected("vault", flags: .applicationPassword, value: "owner's", context: owner) == errSecSuccess)
            let mallory = LAContext()
            mallory.presenter = nil
            #expect(mallory.setCredential(Data("guess".utf8), type: .applicationPassword))
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl-tests",
                kSecAttrAccount as String: "vault", kSecUseAuthenticationContext as String: mallory,
            ]
            let weaker = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil)!
            #expect(
                SecItemUpdate(
                    item as CFDictionary,
                    [
                        kSecValueData as String: Data("mallory's".utf8), kSecAttrAccessControl as String: weaker,
                    ] as CFDictionary) == errSecAuthFailed)
            #expect(
                SecItemUpdate(item as CFDictionary, [kSecValueData as String: Data("mallory's".utf8)] as CFDictionary)
                    == errSecAuthFailed)
            #expect(readProtected("vault", context: owner).value == "owner's")
            #expect(readProtected("vault").status == errSecInteractionNotAllowed, "still under its password")
        }
        await world.close()
    }
}
