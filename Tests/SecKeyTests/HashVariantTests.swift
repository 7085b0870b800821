import Foundation
import KeychainServices
import SecureCrypto
import TestSupport
import Testing

/// The SHA-1, SHA-224, SHA-384 and SHA-512 members of Apple's ECDSA-message, X9.63 key-exchange and ECIES families,
/// each checked against the openssl command-line tool, a second implementation: its signatures verify with
/// `openssl dgst`, its key exchange equals `openssl pkeyutl -derive` followed by `openssl kdf X963KDF`, and its ECIES
/// ciphertexts open with the key and IV those two commands derive. With an enclave key (software or TPM, as the
/// pass runs) and a software key.
@Suite("SecKey: the hash variants of ECDSA, X9.63 key exchange and ECIES, against openssl")
struct HashVariantTests {
    static let names: [DigestAlgorithm: String] = [
        .sha1: "SHA1", .sha224: "SHA224", .sha256: "SHA256", .sha384: "SHA384", .sha512: "SHA512",
    ]

    /// A scratch directory and the openssl command run in it.
    final class OpenSSL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("seckey-hashes-\(UUID())")

        init() throws {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        func write(_ data: Data, _ name: String) throws {
            try data.write(to: directory.appendingPathComponent(name))
        }

        /// `openssl arguments`: its exit status and standard output (standard error when it failed).
        func run(_ arguments: [String]) throws -> (status: Int32, output: Data) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.currentDirectoryURL = directory
            process.arguments = arguments
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let printed = output.fileHandleForReading.readDataToEndOfFile()
            let complaints = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, process.terminationStatus == 0 ? printed : complaints)
        }

        /// A new P-256 key pair made by openssl (`name.pem`), and its public key.
        func newKey(_ name: String) throws -> P256.PublicKey {
            let made = try run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name])
            #expect(made.status == 0, "\(String(decoding: made.output, as: UTF8.self))")
            let exported = try run(["pkey", "-in", name, "-pubout", "-outform", "DER"])
            return try P256.PublicKey(derRepresentation: exported.output)
        }

        /// ECDH between openssl's key `privateKey` (a PEM file) and `peer`: Z.
        func derive(_ privateKey: String, with peer: P256.PublicKey) throws -> Data {
            try write(peer.derRepresentation, "peer.der")
            let derived = try run([
                "pkeyutl", "-derive", "-inkey", privateKey, "-peerkey", "peer.der", "-peerform", "DER",
            ])
            #expect(derived.status == 0, "\(String(decoding: derived.output, as: UTF8.self))")
            return derived.output
        }

        /// openssl's own X9.63 KDF.
        func x963KDF(_ digest: DigestAlgorithm, secret: Data, sharedInfo: Data, byteCount: Int) throws -> Data {
            var arguments = [
                "kdf", "-keylen", "\(byteCount)", "-kdfopt", "digest:\(HashVariantTests.names[digest]!)",
                "-kdfopt", "hexsecret:\(secret.hex)",
            ]
            if !sharedInfo.isEmpty { arguments += ["-kdfopt", "hexinfo:\(sharedInfo.hex)"] }
            let derived = try run(arguments + ["X963KDF"])
            #expect(derived.status == 0, "\(String(decoding: derived.output, as: UTF8.self))")
            // Printed as colon-separated hex.
            let hex = String(decoding: derived.output, as: UTF8.self).filter { $0.isHexDigit }
            return Data(hex: hex)
        }
    }

    /// `key` as a `SecKey`, made from its external representation as a program would.
    static func secKey(_ key: P256.PublicKey) throws -> SecKey {
        let attributes = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
        ]
        return try #require(SecKeyCreateWithData(key.x963Representation as CFData, attributes as CFDictionary, nil))
    }

    static let messageAlgorithms: [(SecKeyAlgorithm, DigestAlgorithm, raw: Bool)] = [
        (.ecdsaSignatureMessageX962SHA1, .sha1, false), (.ecdsaSignatureMessageX962SHA224, .sha224, false),
        (.ecdsaSignatureMessageX962SHA384, .sha384, false), (.ecdsaSignatureMessageX962SHA512, .sha512, false),
        (.ecdsaSignatureMessageRFC4754SHA224, .sha224, true), (.ecdsaSignatureMessageRFC4754SHA384, .sha384, true),
        (.ecdsaSignatureMessageRFC4754SHA512, .sha512, true),
    ]

    @Test(arguments: [true, false])
    func everyMessageHashSignsWhatOpenSSLVerifies(enclave: Bool) throws {
        let openssl = try OpenSSL()
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: enclave))
            try openssl.write(
                try P256.PublicKey(x963Representation: publicKeyBytes(privateKey)).derRepresentation, "pub.der")
            let message = Data("a challenge from the server".utf8)
            try openssl.write(message, "msg")
            try openssl.write(Data("another message".utf8), "other")
            for (algorithm, digest, raw) in Self.messageAlgorithms {
                var signature = try secKeyCall {
                    SecKeyCreateSignature(privateKey, algorithm, message as CFData, $0) as Data?
                }.get()
                if raw {
                    #expect(signature.count == 64, "\(algorithm.rawValue)")
                    signature = try ECDSASignature(rawRepresentation: signature).derRepresentation
                }
                try openssl.write(signature, "sig")
                let hash = "-" + Self.names[digest]!.lowercased()
                let verify = ["dgst", hash, "-verify", "pub.der", "-keyform", "DER", "-signature", "sig"]
                let verified = try openssl.run(verify + ["msg"])
                #expect(
                    verified.status == 0, "\(algorithm.rawValue): \(String(decoding: verified.output, as: UTF8.self))")
                #expect(try openssl.run(verify + ["other"]).status != 0, "\(algorithm.rawValue)")
            }
        }
    }

    static let keyExchangeAlgorithms: [(SecKeyAlgorithm, DigestAlgorithm)] = [
        (.ecdhKeyExchangeStandardX963SHA1, .sha1), (.ecdhKeyExchangeCofactorX963SHA1, .sha1),
        (.ecdhKeyExchangeStandardX963SHA224, .sha224), (.ecdhKeyExchangeCofactorX963SHA224, .sha224),
        (.ecdhKeyExchangeStandardX963SHA256, .sha256), (.ecdhKeyExchangeStandardX963SHA384, .sha384),
        (.ecdhKeyExchangeCofactorX963SHA384, .sha384), (.ecdhKeyExchangeStandardX963SHA512, .sha512),
        (.ecdhKeyExchangeCofactorX963SHA512, .sha512),
    ]

    @Test(arguments: [true, false])
    func everyKeyExchangeHashDerivesWhatOpenSSLDerives(enclave: Bool) throws {
        let openssl = try OpenSSL()
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: enclave))
            let peer = try openssl.newKey("peer.pem")
            let peerKey = try Self.secKey(peer)
            let z = try openssl.derive(
                "peer.pem", with: try P256.PublicKey(x963Representation: publicKeyBytes(privateKey)))
            #expect(z.count == 32)
            let sharedInfo = Data("shared info".utf8)
            // 100 bytes: several blocks of every hash, the last one cut.
            for (algorithm, digest) in Self.keyExchangeAlgorithms {
                let parameters: [String: Any] = [
                    kSecKeyKeyExchangeParameterRequestedSize as String: 100,
                    kSecKeyKeyExchangeParameterSharedInfo as String: sharedInfo,
                ]
                let ours = try secKeyCall {
                    SecKeyCopyKeyExchangeResult(privateKey, algorithm, peerKey, parameters as CFDictionary, $0) as Data?
                }.get()
                let theirs = try openssl.x963KDF(digest, secret: z, sharedInfo: sharedInfo, byteCount: 100)
                #expect(ours.count == 100 && ours == theirs, "\(algorithm.rawValue)")
            }
        }
    }

    static let eciesAlgorithms: [(SecKeyAlgorithm, ECIES.Variant)] = [
        (.eciesEncryptionStandardX963SHA1AESGCM, .init(iv: .zero, digest: .sha1)),
        (.eciesEncryptionCofactorX963SHA1AESGCM, .init(iv: .zero, digest: .sha1)),
        (.eciesEncryptionStandardX963SHA224AESGCM, .init(iv: .zero, digest: .sha224)),
        (.eciesEncryptionStandardX963SHA384AESGCM, .init(iv: .zero, digest: .sha384)),
        (.eciesEncryptionCofactorX963SHA512AESGCM, .init(iv: .zero, digest: .sha512)),
        (.eciesEncryptionStandardVariableIVX963SHA224AESGCM, .init(iv: .fromKDF, digest: .sha224)),
        (.eciesEncryptionCofactorVariableIVX963SHA224AESGCM, .init(iv: .fromKDF, digest: .sha224)),
        (.eciesEncryptionStandardVariableIVX963SHA256AESGCM, .variableIV),
        (.eciesEncryptionStandardVariableIVX963SHA384AESGCM, .init(iv: .fromKDF, digest: .sha384)),
        (.eciesEncryptionCofactorVariableIVX963SHA384AESGCM, .init(iv: .fromKDF, digest: .sha384)),
        (.eciesEncryptionStandardVariableIVX963SHA512AESGCM, .init(iv: .fromKDF, digest: .sha512)),
        (.eciesEncryptionCofactorVariableIVX963SHA512AESGCM, .init(iv: .fromKDF, digest: .sha512)),
    ]

    /// Encrypted to a key openssl made, opened with what openssl derives: Z from its private key and the ciphertext's
    /// ephemeral key, then its X9.63 KDF over Z with the ephemeral key as shared info; the first 16 bytes are the
    /// AES-128-GCM key, the next 16 the IV (16 zero bytes for the legacy variants).
    @Test func everyECIESHashEncryptsWhatOpenSSLsKeyAndKDFOpen() throws {
        let openssl = try OpenSSL()
        try KeyTestStore().with {
            let recipient = try openssl.newKey("recipient.pem")
            let publicKey = try Self.secKey(recipient)
            let plaintext = Data("for openssl's key only".utf8)
            for (algorithm, variant) in Self.eciesAlgorithms {
                let ciphertext = try secKeyCall {
                    SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, $0) as Data?
                }.get()
                #expect(ciphertext.count == plaintext.count + 81, "\(algorithm.rawValue)")
                let ephemeral = ciphertext.prefix(65)
                let z = try openssl.derive("recipient.pem", with: try P256.PublicKey(x963Representation: ephemeral))
                let fromKDF = variant.iv == .fromKDF
                let derived = try openssl.x963KDF(
                    variant.digest, secret: z, sharedInfo: ephemeral, byteCount: fromKDF ? 32 : 16)
                let box = try AESGCM.SealedBox(
                    nonce: try AESGCM.Nonce(fromKDF ? derived.suffix(16) : Data(count: 16)),
                    ciphertext: ciphertext.dropFirst(65).dropLast(16), tag: ciphertext.suffix(16))
                let opened = try AESGCM.open(box, using: SecureBytes(derived.prefix(16)))
                #expect(opened.unprotectedData() == plaintext, "\(algorithm.rawValue)")
            }
        }
    }

    @Test(arguments: [true, false])
    func everyECIESHashDecryptsWithThePrivateKey(enclave: Bool) throws {
        try KeyTestStore().with {
            let privateKey = try makeKey(keyParameters(enclave: enclave))
            let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
            let plaintext = Data("for this key only".utf8)
            for (algorithm, _) in Self.eciesAlgorithms {
                let ciphertext = try secKeyCall {
                    SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, $0) as Data?
                }.get()
                let opened = try secKeyCall {
                    SecKeyCreateDecryptedData(privateKey, algorithm, ciphertext as CFData, $0) as Data?
                }.get()
                #expect(opened == plaintext, "\(algorithm.rawValue)")
                // Another hash derives another key: the ciphertext does not open under the SHA-256 variant.
                if algorithm != .eciesEncryptionStandardVariableIVX963SHA256AESGCM
                    && algorithm != .eciesEncryptionStandardX963SHA256AESGCM
                {
                    #expect(
                        failureStatus {
                            SecKeyCreateDecryptedData(
                                privateKey, .eciesEncryptionStandardVariableIVX963SHA256AESGCM, ciphertext as CFData,
                                $0)
                        } == Int(errSecParam), "\(algorithm.rawValue)")
                }
            }
        }
    }
}
