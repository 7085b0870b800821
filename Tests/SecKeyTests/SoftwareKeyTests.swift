import Foundation
import KeychainServices
import SecureCrypto
import Testing

@Suite("SecKey with software P-256 keys")
struct SoftwareKeyTests {
    static let signatureAlgorithms: [(SecKeyAlgorithm, inputSize: Int?)] = [
        (.ecdsaSignatureMessageX962SHA256, nil), (.ecdsaSignatureMessageX962SHA1, nil),
        (.ecdsaSignatureMessageRFC4754SHA256, nil), (.ecdsaSignatureMessageRFC4754SHA1, nil),
        (.ecdsaSignatureMessageX962SHA224, nil), (.ecdsaSignatureMessageX962SHA384, nil),
        (.ecdsaSignatureMessageX962SHA512, nil), (.ecdsaSignatureMessageRFC4754SHA224, nil),
        (.ecdsaSignatureMessageRFC4754SHA384, nil), (.ecdsaSignatureMessageRFC4754SHA512, nil),
        (.ecdsaSignatureDigestX962SHA1, 20), (.ecdsaSignatureDigestX962SHA224, 28),
        (.ecdsaSignatureDigestX962SHA256, 32), (.ecdsaSignatureDigestX962SHA384, 48),
        (.ecdsaSignatureDigestX962SHA512, 64), (.ecdsaSignatureDigestRFC4754SHA1, 20),
        (.ecdsaSignatureDigestRFC4754SHA224, 28), (.ecdsaSignatureDigestRFC4754SHA256, 32),
        (.ecdsaSignatureDigestRFC4754SHA384, 48), (.ecdsaSignatureDigestRFC4754SHA512, 64),
        (.ecdsaSignatureDigestX962, 32), (.ecdsaSignatureRFC4754, 32),
    ]

    @Test func everyECDSAAlgorithmSignsAndVerifiesAndRejectsAnotherInput() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            for (algorithm, inputSize) in Self.signatureAlgorithms {
                #expect(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "\(algorithm.rawValue)")
                #expect(SecKeyIsAlgorithmSupported(publicKey, .verify, algorithm))
                let input = Data((0..<(inputSize ?? 100)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
                let signature = try secKeyCall {
                    SecKeyCreateSignature(privateKey, algorithm, input as CFData, $0) as Data?
                }.get()
                let isRaw = algorithm.rawValue.contains("RFC4754")
                #expect(isRaw ? signature.count == 64 : signature.first == 0x30, "\(algorithm.rawValue)")
                #expect(
                    SecKeyVerifySignature(publicKey, algorithm, input as CFData, signature as CFData, nil),
                    "\(algorithm.rawValue)")
                var other = input
                other[0] ^= 1
                var error: Unmanaged<CFError>?
                #expect(!SecKeyVerifySignature(publicKey, algorithm, other as CFData, signature as CFData, &error))
                #expect(error?.takeRetainedValue().code == Int(errSecVerifyFailed))
            }
        }
    }

    @Test func rfc4754AndX962SignaturesAreTheSameSignatureInTwoEncodings() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("one message".utf8)
            let raw = try secKeyCall {
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageRFC4754SHA256, message as CFData, $0) as Data?
            }.get()
            let der = try ECDSASignature(rawRepresentation: raw).derRepresentation
            #expect(
                SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, der as CFData, nil))
            #expect(
                SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureDigestX962SHA256, SHA256.hash(message) as CFData, der as CFData, nil))
        }
    }

    @Test func everyECIESAlgorithmRoundTripsAndRefusesAChangedCiphertext() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let plaintext = Data("attack at dawn".utf8)
            for algorithm: SecKeyAlgorithm in [
                .eciesEncryptionStandardVariableIVX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                .eciesEncryptionStandardX963SHA256AESGCM, .eciesEncryptionCofactorX963SHA256AESGCM,
            ] {
                var ciphertext = try secKeyCall {
                    SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, $0) as Data?
                }.get()
                #expect(ciphertext.count == plaintext.count + 65 + 16)
                let opened = try secKeyCall {
                    SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext as CFData, $0) as Data?
                }.get()
                #expect(opened == plaintext, "\(algorithm.rawValue)")
                ciphertext[ciphertext.count - 1] ^= 1
                #expect(
                    failureStatus { SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext as CFData, $0) }
                        == Int(errSecParam))
            }
        }
    }

    @Test func variableIVAndLegacyECIESAreDifferentAlgorithms() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let ciphertext = try secKeyCall {
                SecKeyCreateEncryptedData(
                    publicKey, .eciesEncryptionStandardVariableIVX963SHA256AESGCM, Data("x".utf8) as CFData, $0)
                    as Data?
            }.get()
            #expect(
                failureStatus {
                    SecKeyCreateDecryptedData(
                        privateKey, .eciesEncryptionStandardX963SHA256AESGCM, ciphertext as CFData, $0)
                } == Int(errSecParam))
        }
    }

    @Test func keyExchangeAgreesOnBothSidesWithAndWithoutTheX963KDF() throws {
        try KeyTestStore().with {
            let alice = try makeKey(keyParameters())
            let bob = try makeKey(keyParameters())
            let alicePublic = try #require(SecKeyCopyPublicKey(alice))
            let bobPublic = try #require(SecKeyCopyPublicKey(bob))
            func exchange(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ peer: SecKey, _ parameters: [String: Any])
                throws -> Data
            {
                try secKeyCall {
                    SecKeyCopyKeyExchangeResult(key, algorithm, peer, parameters as CFDictionary, $0) as Data?
                }.get()
            }
            let z = try exchange(alice, .ecdhKeyExchangeStandard, bobPublic, [:])
            #expect(z.count == 32)
            #expect(try exchange(bob, .ecdhKeyExchangeStandard, alicePublic, [:]) == z)
            #expect(try exchange(bob, .ecdhKeyExchangeCofactor, alicePublic, [:]) == z)

            let parameters: [String: Any] = [
                kSecKeyKeyExchangeParameterRequestedSize as String: 48,
                kSecKeyKeyExchangeParameterSharedInfo as String: Data("info".utf8),
            ]
            let derived = try exchange(alice, .ecdhKeyExchangeStandardX963SHA256, bobPublic, parameters)
            #expect(derived.count == 48)
            #expect(try exchange(bob, .ecdhKeyExchangeCofactorX963SHA256, alicePublic, parameters) == derived)
            let expected = try X963KDF.deriveKey(
                sharedSecret: SecureBytes(z), sharedInfo: Data("info".utf8), outputByteCount: 48)
            #expect(expected.unprotectedData() == derived)
        }
    }

    @Test func x963KeyExchangeWithoutRequestedSizeIsAParameterError() throws {
        try KeyTestStore().with {
            let alice = try makeKey(keyParameters())
            let bobPublic = try #require(SecKeyCopyPublicKey(try makeKey(keyParameters())))
            #expect(
                failureStatus {
                    SecKeyCopyKeyExchangeResult(
                        alice, .ecdhKeyExchangeStandardX963SHA256, bobPublic, [:] as CFDictionary, $0)
                } == Int(errSecParam))
        }
    }

    @Test func externalRepresentationsHaveAppleSizesAndRecreateTheSameKeys() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let privateBytes = try secKeyCall { SecKeyCopyExternalRepresentation(privateKey, $0) as Data? }.get()
            let publicBytes = try secKeyCall { SecKeyCopyExternalRepresentation(publicKey, $0) as Data? }.get()
            #expect(privateBytes.count == 97 && privateBytes.first == 0x04)
            #expect(publicBytes.count == 65 && publicBytes.first == 0x04)
            #expect(privateBytes.prefix(65) == publicBytes)

            let recreatedPrivate = try secKeyCall {
                SecKeyCreateWithData(
                    privateBytes as CFData,
                    [
                        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                        kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                    ] as CFDictionary, $0)
            }.get()
            let recreatedPublic = try secKeyCall {
                SecKeyCreateWithData(
                    publicBytes as CFData,
                    [
                        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                        kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
                    ] as CFDictionary, $0)
            }.get()
            #expect(SecKeyCopyExternalRepresentation(recreatedPrivate, nil) as Data? == privateBytes)
            #expect(SecKeyCopyExternalRepresentation(recreatedPublic, nil) as Data? == publicBytes)
            // The recreated private key makes signatures the original public key accepts.
            let signature = try secKeyCall {
                SecKeyCreateSignature(recreatedPrivate, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, $0)
                    as Data?
            }.get()
            #expect(
                SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, signature as CFData, nil))
        }
    }

    @Test func createWithDataRefusesBadBytesAndMissingAttributes() throws {
        try KeyTestStore().with {
            let ec: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
            ]
            var notOnCurve = Data([0x04] + [UInt8](repeating: 1, count: 64))
            #expect(
                failureStatus { SecKeyCreateWithData(notOnCurve as CFData, ec as CFDictionary, $0) }
                    == Int(errSecDecode))
            notOnCurve.removeLast()
            #expect(
                failureStatus { SecKeyCreateWithData(notOnCurve as CFData, ec as CFDictionary, $0) }
                    == Int(errSecDecode))
            #expect(
                failureStatus {
                    SecKeyCreateWithData(
                        Data() as CFData, [kSecAttrKeyClass as String: kSecAttrKeyClassPublic] as CFDictionary, $0)
                } == Int(errSecParam))
            #expect(
                failureStatus {
                    SecKeyCreateWithData(
                        Data() as CFData,
                        [
                            kSecAttrKeyType as String: kSecAttrKeyTypeRSA,
                            kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
                        ]
                            as CFDictionary, $0)
                } == Int(errSecParam))
        }
    }

    @Test func digestAlgorithmsNeedExactlyTheDigestSize() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            for size in [0, 31, 33, 64] {
                #expect(
                    failureStatus {
                        SecKeyCreateSignature(
                            privateKey, .ecdsaSignatureDigestX962SHA256, Data(count: size) as CFData, $0)
                    } == Int(errSecParam))
            }
            var error: Unmanaged<CFError>?
            #expect(
                !SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureDigestX962SHA256, Data(count: 20) as CFData, Data([0x30]) as CFData,
                    &error))
            #expect(error?.takeRetainedValue().code == Int(errSecParam))
        }
    }

    @Test func algorithmsOfAnotherOperationOrKeyClassAreUnsupported() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            #expect(!SecKeyIsAlgorithmSupported(privateKey, .sign, .eciesEncryptionStandardVariableIVX963SHA256AESGCM))
            #expect(!SecKeyIsAlgorithmSupported(publicKey, .sign, .ecdsaSignatureMessageX962SHA256))
            #expect(
                !SecKeyIsAlgorithmSupported(privateKey, .encrypt, .eciesEncryptionStandardVariableIVX963SHA256AESGCM))
            #expect(!SecKeyIsAlgorithmSupported(publicKey, .sign, .ecdsaSignatureMessageX962SHA384))
            #expect(!SecKeyIsAlgorithmSupported(privateKey, .sign, SecKeyAlgorithm(rawValue: "algid:sign:RSA:raw")))
            #expect(SecKeyIsAlgorithmSupported(privateKey, .keyExchange, .ecdhKeyExchangeStandardX963SHA256))
            let message = Data("m".utf8) as CFData
            #expect(
                failureStatus {
                    SecKeyCreateSignature(privateKey, .eciesEncryptionStandardVariableIVX963SHA256AESGCM, message, $0)
                } == Int(errSecParam))
            #expect(
                failureStatus { SecKeyCreateSignature(publicKey, .ecdsaSignatureMessageX962SHA256, message, $0) }
                    == Int(errSecParam))
            #expect(
                failureStatus {
                    SecKeyCreateEncryptedData(
                        privateKey, .eciesEncryptionStandardVariableIVX963SHA256AESGCM, message, $0)
                } == Int(errSecParam))
        }
    }

    @Test func otherKeyTypesAndSizesAreRefused() throws {
        try KeyTestStore().with {
            var rsa = keyParameters()
            rsa[kSecAttrKeyType as String] = kSecAttrKeyTypeRSA
            #expect(failureStatus { SecKeyCreateRandomKey(rsa as CFDictionary, $0) } == Int(errSecParam))
            var p384 = keyParameters()
            p384[kSecAttrKeySizeInBits as String] = 384
            #expect(failureStatus { SecKeyCreateRandomKey(p384 as CFDictionary, $0) } == Int(errSecParam))
        }
    }

    @Test func applicationLabelIsTheSHA1OfThePublicKey() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters())
            let publicBytes = try publicKeyBytes(privateKey)
            let attributes = try #require(SecKeyCopyAttributes(privateKey) as? [String: Any])
            #expect(attributes[kSecAttrApplicationLabel as String] as? Data == InsecureSHA1.hash(publicBytes))
            #expect(attributes[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPrivate as String)
            #expect(attributes[kSecAttrKeyType as String] as? String == kSecAttrKeyTypeECSECPrimeRandom as String)
            #expect(attributes[kSecAttrKeySizeInBits as String] as? Int == 256)
        }
    }

    @Test func permanentSoftwareKeyIsStoredAndComesBackAsAWorkingReference() throws {
        let store = KeyTestStore()
        let tag = Data("com.example.software".utf8)
        let publicKey = try store.with {
            let privateKey = try makeKey(keyParameters(permanent: true, tag: tag))
            return try #require(SecKeyCopyPublicKey(privateKey))
        }
        try store.with {
            var result: CFTypeRef?
            let status = SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecReturnRef as String: true,
                ] as CFDictionary, &result)
            #expect(status == errSecSuccess)
            let key = try #require(result as? SecKey)
            let signature = try secKeyCall {
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, $0) as Data?
            }.get()
            #expect(
                SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, signature as CFData, nil))
        }
    }
}
