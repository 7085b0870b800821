import Enclave
import Foundation
import KeychainServices
import KeychainStore
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing

@Suite("Enclave keys under the context-aware evaluator")
struct EnclaveKeyAccessControlTests {
    @Test func privateKeyUsageAloneNeedsNoAuthenticationButUserPresenceDoes() throws {
        let store = KeyTestStore()
        try store.with(try store.contextClient()) {
            let usageOnly = try #require(
                SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil))
            let free = try makeKey(keyParameters(enclave: true, accessControl: usageOnly))
            #expect(SecKeyCreateSignature(free, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil) != nil)
            // No presenter and no reader: nothing can satisfy user presence, and nothing is prompted.
            let guarded = try makeKey(keyParameters(enclave: true, accessControl: try userPresenceACL()))
            #expect(
                failureStatus {
                    SecKeyCreateSignature(guarded, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, $0)
                } == Int(errSecInteractionNotAllowed))
        }
    }

    @Test func biometryCurrentSetKeysBindTheEnrolledSetIntoTheSealedKey() throws {
        let store = KeyTestStore()
        let client = try store.contextClient()
        func boundHash(_ flags: UInt64) throws -> Data? {
            let policy = AccessControlPolicy(protection: "aku", flags: flags)
            guard
                case .generated(let handle, _) = try client.sendBlocking(
                    KeyRequest.generate(accessControl: policy, item: nil, context: nil))
            else { throw SecKeyFailure(status: 6) }
            let sealed = try EnclaveKey(serialized: handle)
            guard case .accessControl(let bound)? = try AttributeCodec.decode(sealed.accessControl)["accc"] else {
                throw SecKeyFailure(status: 7)
            }
            return bound.boundStateHash
        }
        // Nothing is enrolled in this store: the key is bound to the empty set, and stays bound to it.
        #expect(try boundHash(1 << 30 | 1 << 3) == Data())
        #expect(try boundHash(1 << 30 | 1 << 0) == nil)
    }

    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func keyReturnedByCopyMatchingUsesTheQuerysContext() throws {
        let evaluator = AllowingEvaluator()
        let store = KeyTestStore()
        let tag = Data("com.example.context".utf8)
        let handle = Data(repeating: 0x5C, count: 32)
        try store.with(evaluator: evaluator) {
            _ = try makeKey(
                keyParameters(enclave: true, permanent: true, tag: tag, accessControl: try userPresenceACL()))
            var result: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                        kSecReturnRef as String: true, kSecUseAuthenticationContext as String: handle,
                    ] as CFDictionary, &result) == errSecSuccess)
            let key = try #require(result.map { $0 as! SecKey })
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil) != nil)
            #expect(
                evaluator.calls.last
                    == .init(operation: .useKeySign, context: AuthenticationContextID(bytes: [UInt8](handle))))
        }
    }
}

@Suite("Enclave keys with an LAContext")
struct EnclaveKeyLAContextTests {
    @Test func applicationPasswordKeyNeedsTheContextThatHoldsTheCredential() throws {
        let store = KeyTestStore()
        try store.with(try store.contextClient()) {
            let context = LAContext()
            context.interactionNotAllowed = true
            #expect(context.setCredential(Data("hunter2".utf8), type: .applicationPassword))
            let access = try #require(
                SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .applicationPassword], nil))
            let tag = Data("com.example.app-password".utf8)
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecUseAuthenticationContext as String: context,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                    kSecAttrAccessControl as String: access,
                ],
            ]
            let key = try makeKey(attributes)
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil) != nil)

            func lookUp(_ context: LAContext?) -> SecKey? {
                var query: [String: Any] = [
                    kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                    kSecReturnRef as String: true,
                ]
                if let context { query[kSecUseAuthenticationContext as String] = context }
                var result: CFTypeRef?
                guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return nil }
                return result.map { $0 as! SecKey }
            }
            let found = try #require(lookUp(context))
            #expect(
                SecKeyCreateSignature(found, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil) != nil)
            // Another context without the credential gets no key.
            let stranger = LAContext()
            stranger.interactionNotAllowed = true
            #expect(lookUp(stranger) == nil)
        }
    }
}
