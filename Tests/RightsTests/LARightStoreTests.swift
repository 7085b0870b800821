import Foundation
import KeychainServices
import LocalAuthentication
import TestSupport
import Testing

@Suite("LARightStore and LAPersistedRight: store, key, secret, invalidation", .serialized, .virtualReaderLock)
struct LARightStoreTests {
    static func passcodePresenter() -> ScriptedAuthenticationPresenter {
        ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: ["secret"])
    }

    /// Apple's documented snippets, unchanged (only `presenter`, our addition, is set for the scripted prompt).
    @Test func canonicalAppleSnippetsCompileAndPass() async throws {
        let world = try RightsWorld()
        try await world.run {
            let token = Data("s3cr3t-access-token".utf8)
            _ = try await LARightStore.shared.saveRight(LARight(), identifier: "access-token", secret: token)
            let right = try await LARightStore.shared.right(forIdentifier: "access-token")
            right.presenter = Self.passcodePresenter()
            try await right.authorize(localizedReason: "Sign in to your account")
            let secret = try await right.secret.rawData
            #expect(secret == token)
            let data = Data("challenge from the server".utf8)
            let signature = try await right.key.sign(data, algorithm: .ecdsaSignatureMessageX962SHA256)
            try await right.key.publicKey.verify(
                data, signature: signature, algorithm: .ecdsaSignatureMessageX962SHA256)
            let bytes = try await right.key.publicKey.bytes
            #expect(bytes.count == 65 && bytes.first == 0x04)
        }
        await world.close()
    }

    @Test func keyAndSecretNeedAnAuthorizedRight() async throws {
        let world = try RightsWorld()
        try await world.run {
            let saved = try await LARightStore.shared.saveRight(
                LARight(), identifier: "gated", secret: Data("pin".utf8))
            #expect(saved.state == .unknown)
            let right = try await LARightStore.shared.right(forIdentifier: "gated")
            let data = Data("message".utf8)
            await #expect(throws: LAError.self) { _ = try await right.secret.rawData }
            await #expect(throws: LAError.self) {
                _ = try await right.key.sign(data, algorithm: .ecdsaSignatureMessageX962SHA256)
            }
            // Public-key operations are always allowed.
            let ciphertext = try await right.key.publicKey.encrypt(
                data, algorithm: .eciesEncryptionStandardVariableIVX963SHA256AESGCM)
            #expect(right.key.publicKey.canEncrypt(using: .eciesEncryptionStandardVariableIVX963SHA256AESGCM))
            #expect(right.key.publicKey.canVerify(using: .ecdsaSignatureMessageX962SHA256))
            #expect(right.key.canSign(using: .ecdsaSignatureMessageX962SHA256))
            #expect(right.key.canDecrypt(using: .eciesEncryptionStandardVariableIVX963SHA256AESGCM))
            #expect(right.key.canExchangeKeys(using: .ecdhKeyExchangeStandard))
            #expect(!right.key.canSign(using: .eciesEncryptionStandardVariableIVX963SHA256AESGCM))
            await #expect(throws: LAError.self) {
                _ = try await right.key.decrypt(
                    ciphertext, algorithm: .eciesEncryptionStandardVariableIVX963SHA256AESGCM)
            }

            right.presenter = Self.passcodePresenter()
            try await right.authorize(localizedReason: "Unlock")
            #expect(try await right.secret.rawData == Data("pin".utf8))
            #expect(
                try await right.key.decrypt(ciphertext, algorithm: .eciesEncryptionStandardVariableIVX963SHA256AESGCM)
                    == data)
            let peer = try #require(
                SecKeyCreateRandomKey(
                    [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
                        as CFDictionary, nil))
            let peerPublic = try #require(SecKeyCopyPublicKey(peer))
            let peerBytes = try #require(SecKeyCopyExternalRepresentation(peerPublic, nil)) as Data
            let shared = try await right.key.exchangeKeys(
                publicKey: peerBytes, algorithm: .ecdhKeyExchangeStandard, parameters: [:])
            let rightPublic = try #require(
                SecKeyCreateWithData(
                    try await right.key.publicKey.bytes as CFData,
                    [
                        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                        kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
                    ] as CFDictionary, nil))
            let expected = try #require(
                SecKeyCopyKeyExchangeResult(peer, .ecdhKeyExchangeStandard, rightPublic, [:] as CFDictionary, nil))
            #expect(shared == expected as Data)

            await right.deauthorize()
            await #expect(throws: LAError.self) { _ = try await right.secret.rawData }
            await #expect(throws: LAError.self) {
                _ = try await right.key.sign(data, algorithm: .ecdsaSignatureMessageX962SHA256)
            }
            // A right without a secret reads an empty one once authorized.
            let plain = try await LARightStore.shared.saveRight(
                LARight(requirement: .biometry(fallback: .devicePasscode)), identifier: "plain")
            plain.presenter = Self.passcodePresenter()
            try await plain.authorize(localizedReason: "Unlock")
            #expect(try await plain.secret.rawData.isEmpty)
        }
        await world.close()
    }

    @Test func storeErrorsAndRemovalTakeKeyAndSecret() async throws {
        let world = try RightsWorld()
        try await world.run {
            let store = LARightStore.shared
            _ = try await store.saveRight(LARight(), identifier: "one", secret: Data("1".utf8))
            do {
                _ = try await store.saveRight(LARight(requirement: .biometry), identifier: "one")
                Issue.record("saved an identifier twice")
            } catch {
                #expect(osStatus(error) == Int(errSecDuplicateItem))
            }
            // The requirement stays the one first saved.
            #expect(try store.requirementName(forIdentifier: "one") == "userPresence")
            for missing in ["two"] {
                await #expect { try await store.right(forIdentifier: missing) } throws: {
                    osStatus($0) == Int(errSecItemNotFound)
                }
                await #expect { try await store.removeRight(forIdentifier: missing) } throws: {
                    osStatus($0) == Int(errSecItemNotFound)
                }
            }
            let one = try await store.right(forIdentifier: "one")
            try await store.removeRight(one)
            await #expect(throws: (any Error).self) { try await store.right(forIdentifier: "one") }
            #expect(Self.count(kSecClassKey as String) == 0)
            #expect(Self.count(kSecClassGenericPassword as String) == 0)

            _ = try await store.saveRight(LARight(), identifier: "a", secret: Data("a".utf8))
            _ = try await store.saveRight(LARight(), identifier: "b")
            #expect(try store.identifiers() == ["a", "b"])
            let removed = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                store.removeRight(forIdentifier: "a") { continuation.resume(returning: $0 == nil) }
            }
            #expect(removed)
            let fetched = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                store.right(forIdentifier: "b") { right, error in
                    continuation.resume(returning: right != nil && error == nil)
                }
            }
            #expect(fetched)
            try await store.removeAllRights()
            #expect(try store.identifiers().isEmpty)
            #expect(Self.count(kSecClassKey as String) == 0)
            #expect(Self.count(kSecClassGenericPassword as String) == 0)
        }
        await world.close()
    }

    @Test func rightsSurviveARestartAndStayInTheirApplication() async throws {
        let world = try RightsWorld()
        let publicKey = try await world.run {
            let saved = try await LARightStore.shared.saveRight(LARight(), identifier: "kept", secret: Data("k".utf8))
            return try await saved.key.publicKey.bytes
        }
        _ = try? await world.client.send(.closeReader)
        let reopened = try world.engine.restartedClient(accessGroups: ["test.rights"])
        try await KeychainClientSelection.$current.withValue(reopened) {
            let right = try await LARightStore.shared.right(forIdentifier: "kept")
            #expect(try await right.key.publicKey.bytes == publicKey)
            right.presenter = Self.passcodePresenter()
            try await right.authorize(localizedReason: "again")
            #expect(try await right.secret.rawData == Data("k".utf8))
        }
        _ = try? await reopened.send(.closeReader)
        // Another application (access group) neither sees nor removes it.
        let other = try world.engine.client(accessGroups: ["other.app"])
        try await KeychainClientSelection.$current.withValue(other) {
            await #expect { try await LARightStore.shared.right(forIdentifier: "kept") } throws: {
                osStatus($0) == Int(errSecItemNotFound)
            }
            await #expect { try await LARightStore.shared.removeRight(forIdentifier: "kept") } throws: {
                osStatus($0) == Int(errSecItemNotFound)
            }
            try await LARightStore.shared.removeAllRights()
        }
        _ = try? await other.send(.closeReader)
        try await KeychainClientSelection.$current.withValue(reopened) {
            _ = try await LARightStore.shared.right(forIdentifier: "kept")
        }
        await world.close()
    }

    @Test func aCurrentSetRightIsInvalidatedByAnEnrollmentChangeAndStaysSo() async throws {
        let world = try RightsWorld()
        try await world.enroll("alice-1")
        try await world.run {
            let right = try await LARightStore.shared.saveRight(
                LARight(requirement: .biometryCurrentSet), identifier: "current-set", secret: Data("t".utf8))
            right.presenter = ScriptedAuthenticationPresenter()
            let scan = world.scanSoon("alice-1")
            try await right.authorize(localizedReason: "Sign")
            await scan.value
            let signature = try await right.key.sign(Data("m".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
            try await right.key.publicKey.verify(
                Data("m".utf8), signature: signature, algorithm: .ecdsaSignatureMessageX962SHA256)
            await right.deauthorize()

            try await world.enroll("alice-2", finger: .leftThumb)
            let again = try await LARightStore.shared.right(forIdentifier: "current-set")
            again.presenter = ScriptedAuthenticationPresenter()
            for _ in 0..<2 {
                do {
                    try await again.authorize(localizedReason: "Sign")
                    Issue.record("authorized after an enrollment change")
                } catch let error as LAError {
                    #expect(error.localizedDescription.contains("invalidated"))
                }
                #expect(again.state == .notAuthorized)
            }
            await #expect(throws: LAError.self) { try await again.checkCanAuthorize() }
            await #expect(throws: LAError.self) { _ = try await again.secret.rawData }
        }
        await world.close()
    }

    static func count(_ itemClass: String) -> Int {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass as String: itemClass, kSecMatchLimit as String: kSecMatchLimitAll,
                kSecReturnAttributes as String: true,
            ] as CFDictionary, &result)
        return status == errSecSuccess ? (result as? [Any])?.count ?? 0 : 0
    }
}
