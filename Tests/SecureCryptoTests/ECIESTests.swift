import Foundation
import TestSupport
import Testing

@testable import SecureCrypto

@Suite("Apple ECIES (X9.63 SHA-256, AES-GCM)")
struct ECIESTests {
    // Expected bytes computed independently with Python's `cryptography` package (ECDH, X963KDF with
    // sharedinfo = ephemeral public key, AESGCM with a 16-byte nonce), not with this implementation:
    //   recipient d = SHA256("recipient key for the ECIES KAT"), ephemeral d = SHA256("ephemeral key for the ECIES KAT").
    static let recipient = Data(
        hex:
            "049a3a6492a6fad3ae5aeec2a01787ee82d729d0e0aaabfcde5c17c56bc299fde49eb391399b9b3a276b8207bf1c71f3f500e031ad3babc4322c40617cc3375d958bf8ee7be6242b7122eed697b70d90eae9e52a37d3147998e7703d1010dde539"
    )
    static let ephemeral = Data(
        hex:
            "04d8ac55396fe51b2e22019a33b3a75cd45431144fb471907e88cee8b992e3c7fcdee77a37389653e1e8969544eb06c56f79fc8aa74a7a2bb27697a78500ed00e0d8f3b45cba35087545e3fd081d3345c6bf5b91449d7d5faa07d593914f358a9a"
    )
    static let ephemeralPublicHex =
        "04d8ac55396fe51b2e22019a33b3a75cd45431144fb471907e88cee8b992e3c7fcdee77a37389653e1e8969544eb06c56f79fc8aa74a7a2bb27697a78500ed00e0"

    struct Vector: Sendable, CustomTestStringConvertible {
        var variant: ECIES.Variant
        var plaintext: String
        var sealedTail: String  // ciphertext || tag, after the ephemeral key
        var testDescription: String { "\(variant) \(plaintext.count / 2)-byte message" }
    }

    static let vectors: [Vector] = [
        Vector(variant: .variableIV, plaintext: "", sealedTail: "575b594abe660e691ab56b9911ca5386"),
        Vector(
            variant: .variableIV, plaintext: "48656c6c6f2c204543494553",
            sealedTail: "3794919e22a5bc7418fc0ec567781c000ac2eeea43efa5979517164a"),
        Vector(
            variant: .variableIV,
            plaintext: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627",
            sealedTail:
                "7ff0fff1498c9a3653bc419da56d6a7c05beef3bb5ce1ce1fef7efeff38efe45dbf01af82cd8d4952a7bf63e128f592d4bd975ad3007a1d9"
        ),
        Vector(variant: .zeroIV, plaintext: "", sealedTail: "a41f52d35924377908e01dffb6c27cb8"),
        Vector(
            variant: .zeroIV, plaintext: "48656c6c6f2c204543494553",
            sealedTail: "e5bbaa239e76eb846fe278476db895531082353c370398420426cdaa"),
        Vector(
            variant: .zeroIV,
            plaintext: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627",
            sealedTail:
                "addfc44cf55fcdc624a2371ff6268d2b39a5ea023eb548c82705b9aa6dbee17aa3fae18eaf6816fb0e715798588312e007c935526c7d605d"
        ),
    ]

    @Test("Known answer with a fixed ephemeral key matches bytes computed independently", arguments: vectors)
    func knownAnswer(vector: Vector) throws {
        let recipient = try P256.PrivateKey(x963Representation: SecureBytes(Self.recipient))
        let ephemeral = try P256.PrivateKey(x963Representation: SecureBytes(Self.ephemeral))
        let sealed = try ECIES.seal(
            Data(hex: vector.plaintext), to: recipient.publicKey, variant: vector.variant, ephemeralKey: ephemeral)
        #expect(sealed.hex == Self.ephemeralPublicHex + vector.sealedTail)
        let opened = try ECIES.open(sealed, with: recipient, variant: vector.variant)
        #expect(opened.unprotectedData() == Data(hex: vector.plaintext))
    }

    @Test("Round trip for 0, 1, 16 bytes and 1 MiB, with 81 bytes of overhead", arguments: [0, 1, 16, 1 << 20])
    func roundTrip(size: Int) throws {
        let key = try P256.PrivateKey()
        let message = try SecureRandom.bytes(size)
        let sealed = try ECIES.seal(message, to: key.publicKey)
        #expect(sealed.count == size + ECIES.overheadByteCount)
        #expect(try ECIES.open(sealed, with: key).unprotectedData() == message)
    }

    @Test("A fresh ephemeral key makes every encryption of one message different")
    func freshEphemeral() throws {
        let key = try P256.PrivateKey()
        #expect(
            try ECIES.seal(Data("same".utf8), to: key.publicKey) != ECIES.seal(Data("same".utf8), to: key.publicKey))
    }

    @Test("A flipped bit anywhere, the wrong key, the wrong variant or a short input is refused")
    func refusals() throws {
        let key = try P256.PrivateKey()
        let sealed = try ECIES.seal(Data("attack at dawn".utf8), to: key.publicKey)
        for index in [0, 1, 40, 64, 65, 70, sealed.count - 1] {
            var tampered = sealed
            tampered[index] ^= 0x01
            #expect(throws: CryptoError.self) { try ECIES.open(tampered, with: key) }
        }
        let other = try P256.PrivateKey()
        #expect { try ECIES.open(sealed, with: other) } throws: { CryptoError.Code.authenticationFailure ~= $0 }
        #expect { try ECIES.open(sealed, with: key, variant: .zeroIV) } throws: {
            CryptoError.Code.authenticationFailure ~= $0
        }
        #expect { try ECIES.open(sealed.prefix(64), with: key) } throws: { CryptoError.Code.invalidCiphertext ~= $0 }
        #expect { try ECIES.open(sealed.prefix(80), with: key) } throws: { CryptoError.Code.invalidCiphertext ~= $0 }
    }
}
