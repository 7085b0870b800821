import Foundation
import TestSupport
import Testing

@testable import SecureCrypto

@Suite("Wycheproof vectors")
struct WycheproofTests {
    struct ECDSAGroup: Decodable {
        struct Key: Decodable { var uncompressed: String }
        struct Test: Decodable {
            var tcId: Int; var flags: [String]; var msg: String; var sig: String; var result: String
        }
        var publicKey: Key
        var publicKeyDer: String
        var sha: String
        var tests: [Test]
    }

    @Test("ECDSA P-256 SHA-256, DER signatures: valid accepted, invalid rejected")
    func ecdsaDER() throws {
        let file = try Wycheproof<ECDSAGroup>.load("ecdsa_secp256r1_sha256_test")
        var tally = VectorTally(file: "ecdsa_secp256r1_sha256_test")
        for group in file.testGroups {
            #expect(group.sha == "SHA-256")
            let key = try P256.PublicKey(x963Representation: Data(hex: group.publicKey.uncompressed))
            let fromDER = try P256.PublicKey(derRepresentation: Data(hex: group.publicKeyDer))
            #expect(key == fromDER, "DER and X9.63 imports of one key agree")
            for test in group.tests {
                let accepted: Bool
                if let signature = try? ECDSASignature(derRepresentation: Data(hex: test.sig)) {
                    accepted = key.isValidSignature(signature, for: Data(hex: test.msg))
                } else {
                    accepted = false
                }
                tally.record(
                    tcId: test.tcId, result: test.result, flags: test.flags, outcome: accepted ? .accepted : .rejected)
            }
        }
        tally.finish(expectedTotal: file.numberOfTests)
    }

    @Test("ECDSA P-256 SHA-256, raw r||s (P1363) signatures: valid accepted, invalid rejected")
    func ecdsaP1363() throws {
        let file = try Wycheproof<ECDSAGroup>.load("ecdsa_secp256r1_sha256_p1363_test")
        var tally = VectorTally(file: "ecdsa_secp256r1_sha256_p1363_test")
        for group in file.testGroups {
            let key = try P256.PublicKey(x963Representation: Data(hex: group.publicKey.uncompressed))
            for test in group.tests {
                let accepted: Bool
                if let signature = try? ECDSASignature(rawRepresentation: Data(hex: test.sig)) {
                    accepted = key.isValidSignature(signature, for: Data(hex: test.msg))
                    if accepted {
                        // The conversion round-trips for every signature that verifies.
                        #expect(try signature.rawRepresentation == Data(hex: test.sig))
                    }
                } else {
                    accepted = false
                }
                tally.record(
                    tcId: test.tcId, result: test.result, flags: test.flags, outcome: accepted ? .accepted : .rejected)
            }
        }
        tally.finish(expectedTotal: file.numberOfTests)
    }

    struct ECDHGroup: Decodable {
        struct Test: Decodable {
            var tcId: Int; var flags: [String]; var `public`: String; var `private`: String; var shared: String
            var result: String
        }
        var curve: String
        var encoding: String
        var tests: [Test]
    }

    /// Wycheproof gives private keys as ASN.1-style integers (a leading 00 where the top bit is set).
    static func scalar(_ hex: String) -> SecureBytes? {
        var bytes = [UInt8](Data(hex: hex))
        while bytes.count > 32, bytes.first == 0 { bytes.removeFirst() }
        guard bytes.count <= 32 else { return nil }
        return SecureBytes([UInt8](repeating: 0, count: 32 - bytes.count) + bytes)
    }

    func runECDH(_ name: String, importPublic: (Data) throws -> P256.PublicKey) throws {
        let file = try Wycheproof<ECDHGroup>.load(name)
        var tally = VectorTally(file: name)
        for group in file.testGroups {
            #expect(group.curve == "secp256r1")
            for test in group.tests {
                let privateKey = try P256.PrivateKey(rawScalar: try #require(Self.scalar(test.private)))
                var outcome = VectorOutcome.rejected
                if let peer = try? importPublic(Data(hex: test.public)),
                    let shared = try? privateKey.sharedSecret(with: peer)
                {
                    outcome = .accepted
                    if test.result != "invalid" {
                        #expect(shared.unprotectedData() == Data(hex: test.shared), "tcId \(test.tcId): shared secret")
                    }
                }
                tally.record(tcId: test.tcId, result: test.result, flags: test.flags, outcome: outcome)
            }
        }
        tally.finish(expectedTotal: file.numberOfTests)
    }

    @Test("ECDH P-256 with DER SubjectPublicKeyInfo peers: valid agree, invalid rejected")
    func ecdhASN1() throws {
        try runECDH("ecdh_secp256r1_test") { try P256.PublicKey(derRepresentation: $0) }
    }

    @Test("ECDH P-256 with X9.63 point peers: valid agree, invalid and compressed rejected")
    func ecdhECPoint() throws {
        try runECDH("ecdh_secp256r1_ecpoint_test") { try P256.PublicKey(x963Representation: $0) }
    }

    struct AEADGroup: Decodable {
        struct Test: Decodable {
            var tcId: Int; var flags: [String]; var key: String; var iv: String; var aad: String; var msg: String
            var ct: String; var tag: String; var result: String
        }
        var ivSize: Int
        var keySize: Int
        var tagSize: Int
        var tests: [Test]
    }

    @Test("AES-GCM: 12- and 16-byte nonces with 128/192/256-bit keys; other nonce sizes reported as skipped")
    func aesGCM() throws {
        let file = try Wycheproof<AEADGroup>.load("aes_gcm_test")
        var tally = VectorTally(file: "aes_gcm_test")
        for group in file.testGroups {
            for test in group.tests {
                let nonce = try? AESGCM.Nonce(Data(hex: test.iv))
                guard let nonce, group.tagSize == 128 else {
                    if test.result == "invalid" && nonce == nil && group.ivSize == 0 {
                        // A zero-length nonce is refused by the API itself, which is the rejection asked for.
                        tally.record(tcId: test.tcId, result: test.result, flags: test.flags, outcome: .rejected)
                    } else {
                        tally.record(
                            tcId: test.tcId, result: test.result, flags: test.flags, outcome: .skipped,
                            skipReason: "\(group.ivSize)-bit nonce: the API takes 96- and 128-bit nonces only")
                    }
                    continue
                }
                let key = SecureBytes(Data(hex: test.key))
                let aad = Data(hex: test.aad)
                let box = try AESGCM.SealedBox(nonce: nonce, ciphertext: Data(hex: test.ct), tag: Data(hex: test.tag))
                let opened = try? AESGCM.open(box, using: key, authenticating: aad)
                if test.result == "valid" {
                    let sealed = try AESGCM.seal(Data(hex: test.msg), using: key, nonce: nonce, authenticating: aad)
                    #expect(sealed == box, "tcId \(test.tcId): seal reproduces ciphertext and tag")
                    #expect(
                        opened?.unprotectedData() == Data(hex: test.msg), "tcId \(test.tcId): open gives the message")
                }
                tally.record(
                    tcId: test.tcId, result: test.result, flags: test.flags,
                    outcome: opened == nil ? .rejected : .accepted)
            }
        }
        tally.finish(expectedTotal: file.numberOfTests)
        #expect(tally.counts["valid/accepted", default: 0] >= 150, "the supported sizes cover most vectors")
    }

    /// Through the provider's own functions (the default provider gives them all), and through EVP, the path a
    /// provider without them gets.
    @Test(
        "AES-GCM opener: one keyed context per key opens each 12-byte-nonce vector as AESGCM.open does, after failures too",
        arguments: [false, true])
    func aesGCMOpener(throughEVP: Bool) throws {
        #expect(AESGCM.opensThroughProviderFunctions)
        let file = try Wycheproof<AEADGroup>.load("aes_gcm_test")
        var openers: [String: AESGCM.Opener] = [:]
        var (checked, reused, rejected) = (0, 0, 0)
        for group in file.testGroups where group.tagSize == 128 && group.ivSize == 96 {
            for test in group.tests {
                let key = SecureBytes(Data(hex: test.key))
                if openers[test.key] != nil { reused += 1 }
                let opener = try openers[test.key] ?? AESGCM.Opener(key: key, throughEVP: throughEVP)
                openers[test.key] = opener
                #expect(opener.isKeyed(with: key))
                #expect(opener.isKeyed(with: SecureBytes(Data(hex: test.key))), "the same bytes in another buffer")
                let combined = Data(hex: test.iv) + Data(hex: test.ct) + Data(hex: test.tag)
                let aad = Data(hex: test.aad)
                let reference = try? AESGCM.open(AESGCM.SealedBox(combined: combined), using: key, authenticating: aad)
                // Twice: a finished or failed opening leaves the context ready for the next message.
                for _ in 0..<2 {
                    let opened = combined.withUnsafeBytes { box in
                        aad.withUnsafeBytes { try? opener.open(combined: box, authenticating: $0) }
                    }
                    #expect(opened?.unprotectedData() == reference?.unprotectedData(), "tcId \(test.tcId)")
                    if test.result == "valid" {
                        #expect(opened?.unprotectedData() == Data(hex: test.msg), "tcId \(test.tcId): the message")
                    }
                    if opened == nil { rejected += 1 }
                }
                checked += 1
            }
        }
        #expect(
            checked >= 100 && reused > 0 && rejected > 0,
            "\(checked) vectors, \(reused) on a reused opener, \(rejected) rejections")
        let other = SecureBytes(Data(repeating: 7, count: 32))
        #expect(try !AESGCM.Opener(key: SecureBytes(Data(repeating: 8, count: 32))).isKeyed(with: other))
        #expect(throws: CryptoError.self) { try AESGCM.Opener(key: SecureBytes(Data(count: 20))) }
    }

    struct HKDFGroup: Decodable {
        struct Test: Decodable {
            var tcId: Int; var flags: [String]; var ikm: String; var salt: String; var info: String; var size: Int
            var okm: String; var result: String
        }
        var tests: [HKDFGroup.Test]
    }

    @Test("HKDF-SHA256: valid sizes reproduce the output, sizes above 8160 bytes are refused")
    func hkdf() throws {
        let file = try Wycheproof<HKDFGroup>.load("hkdf_sha256_test")
        var tally = VectorTally(file: "hkdf_sha256_test")
        for group in file.testGroups {
            for test in group.tests {
                let output = try? HKDFSHA256.deriveKey(
                    inputKeyMaterial: SecureBytes(Data(hex: test.ikm)), salt: Data(hex: test.salt),
                    info: Data(hex: test.info), outputByteCount: test.size)
                if let output, test.result == "valid" {
                    #expect(output.unprotectedData() == Data(hex: test.okm), "tcId \(test.tcId)")
                }
                tally.record(
                    tcId: test.tcId, result: test.result, flags: test.flags,
                    outcome: output == nil ? .rejected : .accepted)
            }
        }
        tally.finish(expectedTotal: file.numberOfTests)
    }
}
