import Enclave
import Foundation
import KeychainServices
import KeychainStore
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing

@Suite("SecKey with enclave keys")
struct EnclaveKeyTests {
    /// Apple's documented Secure Enclave example, unchanged but for the test's store.
    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func appleStyleSecureEnclaveCodeCompilesUnchangedAndSigns() throws {
        try KeyTestStore().with(evaluator: AllowingEvaluator()) {
            let tag = "com.example.keys.mykey".data(using: .utf8)!
            let access = SecAccessControlCreateWithFlags(
                kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)!
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true,
                    kSecAttrApplicationTag as String: tag,
                    kSecAttrAccessControl as String: access,
                ],
            ]
            var error: Unmanaged<CFError>?
            guard let privateKey = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
                throw error!.takeRetainedValue() as Error
            }
            guard let publicKey = SecKeyCopyPublicKey(privateKey) else { throw SecKeyFailure(status: 0) }
            let data = "hello".data(using: .utf8)!
            let algorithm: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA256
            guard SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm) else { throw SecKeyFailure(status: 1) }
            guard let signature = SecKeyCreateSignature(privateKey, algorithm, data as CFData, &error) as Data? else {
                throw error!.takeUnretainedValue() as Error
            }
            #expect(SecKeyVerifySignature(publicKey, algorithm, data as CFData, signature as CFData, &error))

            let query: [String: Any] = [
                kSecClass as String: kSecClassKey,
                kSecAttrApplicationTag as String: tag,
                kSecAttrKeyType as String: kSecAttrKeyTypeEC,
                kSecReturnRef as String: true,
            ]
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            #expect(status == errSecSuccess)
            let key = item as! SecKey
            #expect(SecKeyCreateSignature(key, algorithm, data as CFData, &error) != nil)
        }
    }

    @Test func signatureVerifiesWithTheOpenSSLCommandLineTool() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("seckey-openssl-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: true))
            let message = Data("a challenge from the server".utf8)
            let signature = try secKeyCall {
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, $0) as Data?
            }.get()
            let publicBytes = try publicKeyBytes(privateKey)
            let der = try P256.PublicKey(x963Representation: publicBytes).derRepresentation
            try der.write(to: directory.appendingPathComponent("pub.der"))
            try signature.write(to: directory.appendingPathComponent("sig"))
            try message.write(to: directory.appendingPathComponent("msg"))

            func openSSLVerify(_ messageFile: String) throws -> (status: Int32, output: String) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
                process.currentDirectoryURL = directory
                process.arguments = [
                    "dgst", "-sha256", "-verify", "pub.der", "-keyform", "DER", "-signature", "sig", messageFile,
                ]
                let pipe = Pipe()
                process.standardOutput = pipe
                process.standardError = pipe
                try process.run()
                let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return (process.terminationStatus, output)
            }
            let verified = try openSSLVerify("msg")
            #expect(verified.status == 0 && verified.output.contains("Verified OK"), "\(verified.output)")
            try Data("another message".utf8).write(to: directory.appendingPathComponent("other"))
            #expect(try openSSLVerify("other").status != 0)
        }
    }

    @Test func eciesCiphertextMadeWithThePublicKeyDecryptsWithTheEnclaveKey() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: true))
            let publicBytes = try publicKeyBytes(privateKey)
            let plaintext = Data("for the enclave only".utf8)
            for (algorithm, variant): (SecKeyAlgorithm, ECIES.Variant) in [
                (.eciesEncryptionCofactorVariableIVX963SHA256AESGCM, .variableIV),
                (.eciesEncryptionStandardVariableIVX963SHA256AESGCM, .variableIV),
                (.eciesEncryptionStandardX963SHA256AESGCM, .zeroIV),
                (.eciesEncryptionCofactorX963SHA256AESGCM, .zeroIV),
            ] {
                // Sealed outside the SecKey API, from the exported public key alone.
                let ciphertext = try ECIES.seal(
                    plaintext, to: P256.PublicKey(x963Representation: publicBytes), variant: variant)
                let opened = try secKeyCall {
                    SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext as CFData, $0) as Data?
                }.get()
                #expect(opened == plaintext, "\(algorithm.rawValue)")
            }
        }
    }

    @Test func enclaveKeyExchangeMatchesTheSoftwarePeer() throws {
        try KeyTestStore().with {
            let enclaveKey = try makeKey(keyParameters(enclave: true))
            let softwareKey = try makeKey(keyParameters())
            let parameters = [kSecKeyKeyExchangeParameterRequestedSize as String: 32] as CFDictionary
            let fromEnclave = try secKeyCall {
                SecKeyCopyKeyExchangeResult(
                    enclaveKey, .ecdhKeyExchangeStandardX963SHA256, SecKeyCopyPublicKey(softwareKey)!, parameters, $0)
                    as Data?
            }.get()
            let fromSoftware = try secKeyCall {
                SecKeyCopyKeyExchangeResult(
                    softwareKey, .ecdhKeyExchangeStandardX963SHA256, SecKeyCopyPublicKey(enclaveKey)!, parameters, $0)
                    as Data?
            }.get()
            #expect(fromEnclave.count == 32 && fromEnclave == fromSoftware)
            let raw = try secKeyCall {
                SecKeyCopyKeyExchangeResult(
                    enclaveKey, .ecdhKeyExchangeCofactor, SecKeyCopyPublicKey(softwareKey)!, [:] as CFDictionary, $0)
                    as Data?
            }.get()
            #expect(raw.count == 32 && raw != fromEnclave)
            #expect(
                failureStatus {
                    SecKeyCopyKeyExchangeResult(
                        enclaveKey, .ecdhKeyExchangeStandardX963SHA256, SecKeyCopyPublicKey(softwareKey)!,
                        [:] as CFDictionary, $0)
                } == Int(errSecParam))
        }
    }

    @Test func enclavePrivateKeyRefusesExportButItsPublicKeyExports() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: true))
            #expect(failureStatus { SecKeyCopyExternalRepresentation(privateKey, $0) } == Int(errSecUnimplemented))
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            #expect((SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)?.count == 65)
            let attributes = try #require(SecKeyCopyAttributes(privateKey) as? [String: Any])
            #expect(attributes[kSecAttrTokenID as String] as? String == kSecAttrTokenIDSecureEnclave as String)
            #expect(attributes[kSecValueData as String] == nil)
        }
    }

    @Test func enclaveKeyWithAnACLRefusesEveryPrivateKeyOperationUnderTheDefaultEvaluator() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: true, accessControl: try userPresenceACL()))
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            #expect(
                failureStatus {
                    SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, $0)
                } == Int(errSecInteractionNotAllowed))
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(
                    publicKey, .eciesEncryptionStandardVariableIVX963SHA256AESGCM, Data("m".utf8) as CFData, nil)
                    as Data?)
            #expect(
                failureStatus {
                    SecKeyCreateDecryptedData(
                        privateKey, .eciesEncryptionStandardVariableIVX963SHA256AESGCM, ciphertext as CFData, $0)
                } == Int(errSecInteractionNotAllowed))
            #expect(
                failureStatus {
                    SecKeyCopyKeyExchangeResult(
                        privateKey, .ecdhKeyExchangeStandard, publicKey, [:] as CFDictionary, $0)
                } == Int(errSecInteractionNotAllowed))
        }
    }

    @Test func enclaveKeyWithoutAnACLSignsUnderTheDefaultEvaluator() throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: true))
            #expect(
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil)
                    != nil)
        }
    }

    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func satisfiedACLSignsAndTheEvaluatorSeesEachOperationWithTheCallersContext() throws {
        let evaluator = AllowingEvaluator()
        let contextHandle = Data((0..<32).map { UInt8($0) })
        try KeyTestStore().with(evaluator: evaluator) {
            let privateKey = try makeKey(
                keyParameters(
                    enclave: true, accessControl: try userPresenceACL(),
                    extra: [kSecUseAuthenticationContext as String: contextHandle]))
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let message = Data("m".utf8)
            let signature = try secKeyCall {
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, $0) as Data?
            }.get()
            #expect(
                SecKeyVerifySignature(
                    publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature as CFData, nil))
            let ciphertext = try #require(
                SecKeyCreateEncryptedData(publicKey, .eciesEncryptionStandardX963SHA256AESGCM, message as CFData, nil)
                    as Data?)
            #expect(
                SecKeyCreateDecryptedData(
                    privateKey, .eciesEncryptionStandardX963SHA256AESGCM, ciphertext as CFData, nil)
                    as Data? == message)
            #expect(
                SecKeyCopyKeyExchangeResult(privateKey, .ecdhKeyExchangeStandard, publicKey, [:] as CFDictionary, nil)
                    != nil)
            let context = AuthenticationContextID(bytes: [UInt8](contextHandle))
            #expect(
                evaluator.calls == [
                    .init(operation: .useKeySign, context: context), .init(operation: .useKeyDecrypt, context: context),
                    .init(operation: .useKeyKeyExchange, context: context),
                ])
        }
    }

    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func lockedProtectionClassStopsTheKeyUntilUnlock() throws {
        let store = KeyTestStore()
        let client = try store.client(evaluator: AllowingEvaluator())
        try store.with(client) {
            let privateKey = try makeKey(keyParameters(enclave: true, accessControl: try userPresenceACL()))
            _ = try client.sendBlocking(KeychainRequest.lock)
            #expect(
                failureStatus {
                    SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, $0)
                } == Int(errSecInteractionNotAllowed))
            // The mechanism under the engine's unlock (which needs the passcode): the shared state file.
            try Enclave(directory: store.directory).unlock()
            #expect(
                SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, nil)
                    != nil)
        }
    }

    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func permanentEnclaveKeyWorksFromANewEngineOnTheSameDirectory() throws {
        let store = KeyTestStore()
        let tag = Data("com.example.persisted".utf8)
        let (publicBytes, label) = try store.with(evaluator: AllowingEvaluator()) {
            let privateKey = try makeKey(
                keyParameters(enclave: true, permanent: true, tag: tag, accessControl: try userPresenceACL()))
            let publicBytes = try #require(
                SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(privateKey)!, nil) as Data?)
            return (publicBytes, InsecureSHA1.hash(publicBytes))
        }
        try store.with(evaluator: AllowingEvaluator()) {
            var result: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                        kSecReturnAttributes as String: true, kSecReturnRef as String: true,
                    ] as CFDictionary, &result) == errSecSuccess)
            let found = try #require(result as? [String: Any])
            #expect(found[kSecAttrApplicationLabel as String] as? Data == label)
            #expect(found[kSecAttrTokenID as String] as? String == kSecAttrTokenIDSecureEnclave as String)
            #expect(found[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPrivate as String)
            #expect(found[kSecAttrAccessControl as String] is SecAccessControl)
            let key = try #require(found[kSecValueRef as String].map { $0 as! SecKey })
            #expect(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, nil) as Data? == publicBytes)
            #expect(failureStatus { SecKeyCopyExternalRepresentation(key, $0) } == Int(errSecUnimplemented))
            let message = Data("after restart".utf8)
            let signature = try secKeyCall {
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, $0) as Data?
            }.get()
            let publicKey = try P256.PublicKey(x963Representation: publicBytes)
            #expect(publicKey.isValidSignature(try ECDSASignature(derRepresentation: signature), for: message))
        }
        // The stored item is the sealed key, not the private scalar.
        let client = try store.client(evaluator: AllowingEvaluator())
        guard
            case .items(let items) = try client.sendBlocking(
                .copyMatching([
                    "class": .string("keys"), "atag": .data(tag), "r_Data": .bool(true),
                ])),
            let stored = items.items.first?.data?.unprotectedData()
        else { throw SecKeyFailure(status: 2) }
        // Software: the scalar sealed under the root key (LAEK1); TPM: the TPM's key object (LAEK3).
        let tpm = ProcessInfo.processInfo.environment["LA_ENCLAVE"] == "tpm"
        #expect(stored.starts(with: Data((tpm ? "LAEK3" : "LAEK1").utf8)))
        #expect(try EnclaveKey(serialized: stored).isTPMHeld == tpm)
    }

    @Test func duplicatePermanentEnclaveKeyTagStillMakesDistinctKeys() throws {
        try KeyTestStore().with {
            let tag = Data("com.example.twice".utf8)
            let first = try makeKey(keyParameters(enclave: true, permanent: true, tag: tag))
            let second = try makeKey(keyParameters(enclave: true, permanent: true, tag: tag))
            #expect(
                SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(first)!, nil) as Data?
                    != SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(second)!, nil) as Data?)
            var result: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                        kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnRef as String: true,
                    ] as CFDictionary,
                    &result) == errSecSuccess)
            #expect((result as? [Any])?.count == 2)
        }
    }

    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func changedSealedKeyOrChangedACLDoesNotOpen() throws {
        let store = KeyTestStore()
        let client = try store.client(evaluator: AllowingEvaluator())
        let policy = AccessControlPolicy(protection: "aku", flags: 0x4000_0001)
        guard
            case .generated(let handle, _) = try client.sendBlocking(
                KeyRequest.generate(accessControl: policy, item: nil, context: nil))
        else { throw SecKeyFailure(status: 3) }
        let digest = SHA256.hash(Data("m".utf8))
        guard case .signature = try client.sendBlocking(KeyRequest.sign(handle: handle, digest: digest, context: nil))
        else {
            throw SecKeyFailure(status: 4)
        }
        let sealed = try EnclaveKey(serialized: handle)

        var changedScalar = sealed
        if sealed.isTPMHeld {
            // The TPM's private area (its last bytes): encrypted and integrity-protected by the TPM.
            changedScalar.tpmObject[changedScalar.tpmObject.count - 20] ^= 1
        } else {
            changedScalar.sealedScalar[changedScalar.sealedScalar.count - 20] ^= 1
        }
        var weakerACL = sealed
        weakerACL.accessControl = Data()
        var otherACL = sealed
        otherACL.accessControl = AttributeCodec.encode([
            "accc": .accessControl(AccessControlPolicy(protection: "dku", flags: 0x4000_0000))
        ])
        var otherPublicKey = sealed
        otherPublicKey.publicKey = try P256.PrivateKey().publicKey.x963Representation
        for tampered in [changedScalar, weakerACL, otherACL, otherPublicKey] {
            #expect(
                statusCode {
                    try client.sendBlocking(KeyRequest.sign(handle: tampered.serialized, digest: digest, context: nil))
                }
                    == .decode)
        }
        #expect(
            statusCode {
                try client.sendBlocking(KeyRequest.sign(handle: Data("not a key".utf8), digest: digest, context: nil))
            }
                == KeychainStatus.Code(rawValue: errSecInvalidKeyRef))
    }

    @Test(.embeddedOnly("injects an access-control evaluator that allows every operation"))
    func sealedKeyDoesNotOpenInAnotherStore() throws {
        let (firstStore, secondStore) = (KeyTestStore(), KeyTestStore())
        let first = try firstStore.client(evaluator: AllowingEvaluator())
        let second = try secondStore.client(evaluator: AllowingEvaluator())
        guard
            case .generated(let handle, _) = try first.sendBlocking(
                KeyRequest.generate(accessControl: nil, item: nil, context: nil))
        else {
            throw SecKeyFailure(status: 5)
        }
        let digest = SHA256.hash(Data("m".utf8))
        #expect(
            statusCode { try second.sendBlocking(KeyRequest.sign(handle: handle, digest: digest, context: nil)) }
                == .decode)
        #expect(
            statusCode { try first.sendBlocking(KeyRequest.sign(handle: handle, digest: digest, context: nil)) } == nil)
    }
}

@Suite("SecKey references added with kSecValueRef")
struct KeyReferenceAddTests {
    @Test func addedKeysKeepTheirClassLabelAndTokenAndStillWork() throws {
        try KeyTestStore().with {
            let enclaveKey = try makeKey(keyParameters(enclave: true))
            let softwareKey = try makeKey(keyParameters())
            for (key, tag) in [(enclaveKey, "enclave"), (softwareKey, "software")] {
                #expect(
                    SecItemAdd(
                        [kSecValueRef as String: key, kSecAttrApplicationTag as String: Data(tag.utf8)] as CFDictionary,
                        nil) == errSecSuccess)
                var result: CFTypeRef?
                #expect(
                    SecItemCopyMatching(
                        [
                            kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
                            kSecReturnAttributes as String: true, kSecReturnRef as String: true,
                        ] as CFDictionary, &result) == errSecSuccess)
                let found = try #require(result as? [String: Any])
                #expect(found[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPrivate as String)
                #expect(
                    found[kSecAttrApplicationLabel as String] as? Data == InsecureSHA1.hash(try publicKeyBytes(key)))
                let stored = try #require(found[kSecValueRef as String].map { $0 as! SecKey })
                let signature = try secKeyCall {
                    SecKeyCreateSignature(stored, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, $0)
                        as Data?
                }.get()
                #expect(
                    SecKeyVerifySignature(
                        SecKeyCopyPublicKey(key)!, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData,
                        signature as CFData, nil))
            }
            #expect(failureStatus { SecKeyCopyExternalRepresentation(enclaveKey, $0) } == Int(errSecUnimplemented))
        }
    }
}
