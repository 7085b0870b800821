import Enclave
import Foundation
import KeychainServices
import KeychainStore
import LocalAuthentication
import SecureCrypto
import SecurityProtocol
import SecurityServer
import Testing

/// The attack review's findings about keys (issue "Fixes from an attack review", findings 2 and 3).
@Suite("Attack review: keys")
struct KeyAttackTests {
    /// Finding 2: an enclave key with `.applicationPassword` signed for a context holding any non-empty password,
    /// the key being sealed under the root key alone. Now the password is part of the key's sealing key.
    @Test func aPasswordBoundEnclaveKeySignsOnlyWithItsPassword() throws {
        let store = KeyTestStore()
        let client = try store.contextClient()
        try store.with(client) {
            let owner = LAContext()
            owner.interactionNotAllowed = true
            #expect(owner.setCredential(Data("hunter2".utf8), type: .applicationPassword))
            let access = try #require(
                SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .applicationPassword], nil))
            let tag = Data("com.example.bound-key".utf8)
            let key = try makeKey([
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecUseAuthenticationContext as String: owner,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                    kSecAttrAccessControl as String: access,
                ],
            ])
            let message = Data("m".utf8) as CFData
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, nil) != nil)

            // The stored key's handle is sealed under the password too: another password does not even find it.
            let mallory = LAContext()
            mallory.interactionNotAllowed = true
            #expect(mallory.setCredential(Data("guess".utf8), type: .applicationPassword))
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                        kSecReturnRef as String: true,
                        kSecUseAuthenticationContext as String: mallory,
                    ] as CFDictionary, nil) == errSecAuthFailed)

            // Whoever holds the handle (a daemon client that once saw it) asks the engine to sign with a context
            // holding another password, right after the owner signed: nothing opens.
            var ownerFound: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                        kSecReturnData as String: true,
                        kSecUseAuthenticationContext as String: owner,
                    ] as CFDictionary, &ownerFound) == errSecSuccess)
            let handle = try #require(ownerFound as? Data)
            let digest = SHA256.hash(Data("m".utf8))
            #expect(throws: KeychainStatus.self) {
                _ = try client.sendBlocking(
                    KeyRequest.sign(handle: handle, digest: digest, context: try mallory.authenticationContextID()))
            }
            do {
                _ = try client.sendBlocking(
                    KeyRequest.sign(handle: handle, digest: digest, context: try mallory.authenticationContextID()))
            } catch let status as KeychainStatus {
                #expect(status.code == .authFailed)
            }
            // Decryption and key exchange are refused the same way.
            let peer = try P256.PrivateKey().publicKey.x963Representation
            let strangerContext = try mallory.authenticationContextID()
            for request in [
                KeyRequest.keyExchange(handle: handle, peer: peer, kdf: nil, context: strangerContext),
                KeyRequest.decrypt(
                    handle: handle, ciphertext: Data(repeating: 1, count: 100), variant: .variableIV,
                    context: strangerContext),
            ] {
                do {
                    _ = try client.sendBlocking(request)
                    Issue.record("a key use with another password succeeded")
                } catch let status as KeychainStatus {
                    #expect(status.code == .authFailed)
                }
            }
            guard
                case .signature = try client.sendBlocking(
                    KeyRequest.sign(handle: handle, digest: digest, context: try owner.authenticationContextID()))
            else {
                Issue.record("the owner's context no longer signs")
                return
            }
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, nil) != nil)
        }
    }

    /// A key made before the password was part of keys (sealed under the root key alone, its list naming
    /// `.applicationPassword`) was never checked against any particular password: it fails closed now.
    @Test func aKeyFromBeforePasswordBindingFailsClosed() throws {
        let store = KeyTestStore()
        let client = try store.contextClient()
        let policy = AccessControlPolicy(protection: "ak", flags: (1 << 30) | (1 << 31))
        let legacy = try Enclave(directory: store.directory).generateKey(
            accessControl: AttributeCodec.encode(["accc": .accessControl(policy)]))
        #expect(legacy.passwordKDF.isEmpty)
        try store.with(client) {
            let context = LAContext()
            context.interactionNotAllowed = true
            #expect(context.setCredential(Data("anything".utf8), type: .applicationPassword))
            do {
                _ = try client.sendBlocking(
                    KeyRequest.sign(
                        handle: legacy.serialized, digest: SHA256.hash(Data("m".utf8)),
                        context: try context.authenticationContextID()))
                Issue.record("an unbound password key signed")
            } catch let status as KeychainStatus {
                #expect(status.code == .authFailed)
            }
            _ = context
        }
    }

    /// A key exchange's requested size is the client's to choose: one asking for gigabytes must be refused before
    /// the daemon derives (and allocates) them, not kill it for every user.
    @Test func aKeyExchangeAskingForMoreThanTheKDFsLimitIsRefusedWithoutDerivingIt() throws {
        let store = KeyTestStore()
        let client = try store.client()
        let key = try Enclave(directory: store.directory).generateKey(
            accessControl: AttributeCodec.encode([
                "accc": .accessControl(AccessControlPolicy(protection: "ak", flags: 0))
            ])
        )
        let peer = try P256.PrivateKey().publicKey.x963Representation
        func exchange(_ byteCount: Int) throws -> KeyResponse {
            try client.sendBlocking(
                KeyRequest.keyExchange(
                    handle: key.serialized, peer: peer,
                    kdf: X963KDFParameters(digest: .sha512, sharedInfo: Data(), byteCount: byteCount), context: nil))
        }
        for byteCount in [1 << 34, X963KDF.maximumOutputByteCount + 1, 0, -1] {
            do {
                _ = try exchange(byteCount)
                Issue.record("a key exchange of \(byteCount) bytes was served")
            } catch let status as KeychainStatus {
                #expect(status.code == .param, "\(byteCount): \(status)")
            }
        }
        // The limit itself is derived.
        let z = try SecureBytes(randomCount: 32)
        #expect(
            try X963KDF.deriveKey(.sha512, sharedSecret: z, outputByteCount: X963KDF.maximumOutputByteCount).count
                == X963KDF.maximumOutputByteCount)
        #expect(throws: CryptoError.self) {
            try X963KDF.deriveKey(.sha512, sharedSecret: z, outputByteCount: X963KDF.maximumOutputByteCount + 1)
        }
    }

    /// Finding 3: a software key with `.privateKeyUsage` was stored unprotected, exportable and usable without any
    /// check. Apple refuses `privateKeyUsage` outside the Secure Enclave at creation.
    @Test func privateKeyUsageOutsideTheEnclaveIsRefusedAndNothingIsStored() throws {
        let store = KeyTestStore()
        try store.with(try store.contextClient()) {
            for flags in [SecAccessControlCreateFlags.privateKeyUsage, [.userPresence, .privateKeyUsage]] {
                let access = try #require(
                    SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil))
                let tag = Data("com.example.software-\(flags.rawValue)".utf8)
                var error: Unmanaged<CFError>?
                let key = SecKeyCreateRandomKey(
                    [
                        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                        kSecAttrKeySizeInBits as String: 256,
                        kSecPrivateKeyAttrs as String: [
                            kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                            kSecAttrAccessControl as String: access,
                        ],
                    ] as CFDictionary, &error)
                #expect(key == nil)
                #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecParam))
                #expect(
                    SecItemCopyMatching(
                        [
                            kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                        ] as CFDictionary, nil) == errSecItemNotFound)
                // Nor through SecItemAdd of the key's bytes.
                let software = try #require(
                    SecKeyCreateRandomKey(
                        [
                            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                            kSecAttrKeySizeInBits as String: 256,
                        ] as CFDictionary, nil))
                #expect(
                    SecItemAdd(
                        [
                            kSecClass as String: kSecClassKey, kSecValueRef as String: software,
                            kSecAttrApplicationTag as String: tag, kSecAttrAccessControl as String: access,
                        ] as CFDictionary, nil) == errSecParam)
            }
            // The Secure Enclave path with the same flags still works.
            let access = try #require(
                SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .privateKeyUsage, nil))
            let enclave = try makeKey([
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrAccessControl as String: access,
                ],
            ])
            #expect(
                SecKeyCreateSignature(enclave, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil) != nil)
        }
    }
}
