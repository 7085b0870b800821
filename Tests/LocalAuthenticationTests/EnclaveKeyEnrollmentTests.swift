import Foundation
import KeychainServices
import LocalAuthentication
import TestSupport
import Testing

@Suite("Enclave keys and enrollment changes", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct EnclaveKeyEnrollmentTests {
    /// An enclave P-256 key whose private-key use needs `flags` (with `.privateKeyUsage`), made with `context`.
    func makeEnclaveKey(_ flags: SecAccessControlCreateFlags, tag: String, context: LAContext) throws -> SecKey {
        let access = try #require(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, flags], nil))
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            kSecUseAuthenticationContext as String: context,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent as String: true,
                kSecAttrApplicationTag as String: Data(tag.utf8),
                kSecAttrAccessControl as String: access,
            ] as [String: Any],
        ]
        var error: Unmanaged<CFError>?
        guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return key
    }

    /// Signs `message` with `key`; nil and the OSStatus when the engine refuses.
    func sign(_ key: SecKey, _ message: Data) -> (signature: Data?, status: Int) {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) as Data?
        return (signature, error.map { ($0.takeRetainedValue() as NSError).code } ?? 0)
    }

    /// An LAContext of this world that a matching finger has just satisfied.
    func fingerprintContext(_ world: LocalAuthenticationWorld, finger printID: String) async throws -> LAContext {
        let context = LAContext()
        context.presenter = ScriptedAuthenticationPresenter()
        async let matched = context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "sign")
        try await world.scan(printID)
        #expect(try await matched)
        return context
    }

    @Test func biometryCurrentSetKeySignsBeforeAnEnrollmentChangeAndNeverAfterWhileBiometryAnyKeepsWorking()
        async throws
    {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let message = Data("server challenge".utf8)
        try await world.run {
            let creator = LAContext()
            creator.presenter = nil
            let currentSet = try makeEnclaveKey(.biometryCurrentSet, tag: "current-set", context: creator)
            _ = try makeEnclaveKey(.biometryAny, tag: "any-finger", context: creator)
            let publicKey = try #require(SecKeyCopyPublicKey(currentSet))

            // Without a satisfied context the engine may not prompt (no presenter): refused.
            #expect(sign(currentSet, message).signature == nil)

            let before = try await fingerprintContext(world, finger: "alice-1")
            let keyBefore = try keyUsable("current-set", with: before)
            let signature = try #require(sign(keyBefore, message).signature)
            var verifyError: Unmanaged<CFError>?
            #expect(
                SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData,
                    signature as CFData, &verifyError))
            #expect(sign(try keyUsable("any-finger", with: before), message).signature != nil)

            // A finger numbered after the first one: on the fprintd pass the reader cannot identify, and fprintd
            // then verifies only the lowest-numbered enrolled finger (right index stays it).
            try await world.enroll("alice-2", finger: .rightMiddle)

            let after = try await fingerprintContext(world, finger: "alice-1")
            let refused = sign(try keyUsable("current-set", with: after), message)
            #expect(refused.signature == nil)
            #expect(refused.status == Int(errSecAuthFailed), "the key is bound to the enrolled set it was made with")
            #expect(sign(try keyUsable("any-finger", with: after), message).signature != nil, "biometryAny survives")

            // For good: removing the new finger again does not bring the old set's hash back.
            try await removePrintThroughRequests(world.client, finger: .rightMiddle)
            let later = try await fingerprintContext(world, finger: "alice-1")
            #expect(sign(try keyUsable("current-set", with: later), message).signature == nil)
        }
        await world.close()
    }

    /// The stored enclave private key tagged `tag`, looked up with `context` as `kSecUseAuthenticationContext`, so
    /// its private-key operations run under that context's credential (as on Apple platforms).
    func keyUsable(_ tag: String, with context: LAContext) throws -> SecKey {
        let query: [String: Any] = [
            kSecClass as String: kSecClassKey,
            kSecAttrApplicationTag as String: Data(tag.utf8),
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            kSecReturnRef as String: true,
            kSecUseAuthenticationContext as String: context,
        ]
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        #expect(status == errSecSuccess)
        return try #require(item as? SecKey)
    }
}
