import Foundation
import TestSupport
import Testing

@testable import SecureCrypto

@Suite("Digests, MACs, KDFs, AES-GCM and SecureBytes")
struct PrimitiveTests {
    @Test("SHA-256 of \"abc\" and incremental hashing match FIPS 180-2")
    func sha256() {
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(SHA256.hash(Data("abc".utf8)).hex == expected)
        var hasher = SHA256()
        hasher.update(Data("a".utf8))
        var copy = hasher
        hasher.update(Data("bc".utf8))
        #expect(hasher.finalize().hex == expected)
        copy.update(Data("b".utf8))
        copy.update(Data("c".utf8))
        #expect(copy.finalize().hex == expected, "a copied hasher continues independently")
    }

    @Test("HMAC-SHA256 matches RFC 4231 test case 2")
    func hmac() {
        let code = HMACSHA256.authenticationCode(
            for: Data("what do ya want for nothing?".utf8), using: SecureBytes(Data("Jefe".utf8)))
        #expect(code.hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(
            HMACSHA256.isValidAuthenticationCode(
                code, for: Data("what do ya want for nothing?".utf8), using: SecureBytes(Data("Jefe".utf8))))
        #expect(
            !HMACSHA256.isValidAuthenticationCode(
                code, for: Data("what do ya want for nothing!".utf8), using: SecureBytes(Data("Jefe".utf8))))
    }

    /// Issue "Caller identity", item 6: a decryption context returned to the pool keeps nothing of the row key it
    /// last opened with (neither the key nor its schedule, whose first round keys are the key itself).
    @Test func aPooledDecryptionContextKeepsNothingOfItsLastKey() throws {
        for _ in 0..<20 {
            let key = try SecureBytes(randomCount: 32)
            let box = try AESGCM.seal(Data("a row's value, longer than a block".utf8), using: key)
            _ = try AESGCM.open(box, using: key)
            let firstHalf = key.withUnsafeBytes { Array($0.prefix(16)) }
            // The bool alone is checked: a failure must not print the key's bytes.
            let found = AESGCM.idleContextsContain(firstHalf)
            #expect(!found, "a pooled context still holds the key it last opened with")
        }
    }

    @Test("X9.63 KDF with SHA-256 matches the NIST CAVS ANSI X9.63 vector")
    func x963KDF() throws {
        // CAVS 12.0 "ansx963_2001.rsp", SHA-256, shared secret 192 bits, shared info 0, key data 128 bits, COUNT = 0.
        let z = SecureBytes(Data(hex: "96c05619d56c328ab95fe84b18264b08725b85e33fd34f08"))
        let key = try X963KDF.deriveKey(sharedSecret: z, outputByteCount: 16)
        #expect(key.unprotectedData().hex == "443024c3dae66b95e6f5670601558f71")
        #expect(throws: CryptoError.self) { try X963KDF.deriveKey(sharedSecret: z, outputByteCount: 0) }
    }

    @Test("scrypt matches RFC 7914's test vector, PBKDF2-SHA256 RFC 7914's, and parameters survive encoding")
    func passwordKDFs() throws {
        let scrypt = try PasswordKDF.scrypt(
            cost: 1024, blockSize: 8, parallelism: 16, outputByteCount: 64, salt: Data("NaCl".utf8))
        #expect(
            try scrypt.deriveKey(from: SecureBytes(Data("password".utf8))).unprotectedData().hex
                == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
        )
        let pbkdf2 = try PasswordKDF.pbkdf2SHA256(iterations: 1, outputByteCount: 64, salt: Data("salt".utf8))
        #expect(
            try pbkdf2.deriveKey(from: SecureBytes(Data("passwd".utf8))).unprotectedData().hex
                == "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
        )
        let decoded = try JSONDecoder().decode(PasswordKDF.self, from: JSONEncoder().encode(scrypt))
        #expect(decoded == scrypt)
        #expect(throws: CryptoError.self) { try PasswordKDF.scrypt(cost: 1000) }
    }

    @Test("AES-256-GCM opens only with the same key, nonce and associated data")
    func aesGCMBinding() throws {
        let key = try SecureBytes(randomCount: 32)
        let box = try AESGCM.seal(Data("secret".utf8), using: key, authenticating: Data("row 1".utf8))
        #expect(
            try AESGCM.open(box, using: key, authenticating: Data("row 1".utf8)).unprotectedData()
                == Data("secret".utf8))
        #expect { try AESGCM.open(box, using: key, authenticating: Data("row 2".utf8)) } throws: {
            CryptoError.Code.authenticationFailure ~= $0
        }
        #expect {
            try AESGCM.open(box, using: SecureBytes(randomCount: 32), authenticating: Data("row 1".utf8))
        } throws: { CryptoError.Code.authenticationFailure ~= $0 }
        var tampered = box
        tampered.ciphertext[0] ^= 1
        #expect { try AESGCM.open(tampered, using: key, authenticating: Data("row 1".utf8)) } throws: {
            CryptoError.Code.authenticationFailure ~= $0
        }
        let combined = try AESGCM.SealedBox(combined: box.combined)
        #expect(combined == box)
        #expect { try AESGCM.seal(Data(), using: SecureBytes(zeros: 20)) } throws: {
            CryptoError.Code.invalidParameter ~= $0
        }
        #expect { try AESGCM.Nonce(Data(count: 8)) } throws: { CryptoError.Code.invalidParameter ~= $0 }
    }

    @Test("SecureBytes compares by content, copies on write, and never prints its bytes")
    func secureBytes() throws {
        let a = SecureBytes(Data("same secret".utf8))
        var b = a
        #expect(a == b)
        b.withUnsafeMutableBytes { $0[0] ^= 0xFF }
        #expect(a != b, "mutating a copy leaves the original alone")
        #expect(a.unprotectedData() == Data("same secret".utf8))
        #expect(!"\(a)".contains("same") && "\(a)" == "SecureBytes(11 bytes)")
        #expect(a.appending(SecureBytes(Data("!".utf8))).unprotectedData() == Data("same secret!".utf8))
        #expect(try SecureBytes(randomCount: 32) != SecureBytes(randomCount: 32))
    }

    @Test("A string's UTF-8 bytes equal only the same bytes, small and large strings alike")
    func utf8Equality() {
        let long = String(repeating: "genp-", count: 20)
        for text in ["", "ak", "genp", "ké", long] {
            let bytes = Data(text.utf8)
            let equal = text.utf8Equals(bytes.bytes)
            #expect(equal, "\(text)")
            var others = [bytes + [0]]
            if !bytes.isEmpty {
                var changed = bytes
                changed[changed.count - 1] ^= 1
                others += [Data(bytes.dropLast()), changed]
            }
            for other in others {
                let equal = text.utf8Equals(other.bytes)
                #expect(!equal, "\(text) against \(Array(other))")
            }
        }
    }

    @Test("The storage is wiped when the last copy is released")
    func wipedOnRelease() {
        var pointer: UnsafeMutableRawPointer?
        do {
            let secret = SecureBytes(Data(repeating: 0xA5, count: 64))
            pointer = secret.storage.pointer
            // The allocation is freed after this scope; read it only through the cleanse hook below.
            #expect(secret.withUnsafeBytes { $0.allSatisfy { $0 == 0xA5 } })
        }
        // After release the bytes must no longer hold the secret pattern. glibc keeps a freed 64-byte block mapped
        // and overwrites only its first 16 bytes (the tcache link), so bytes 16..<64 still show the secret unless
        // the release wiped them: without OPENSSL_cleanse this test fails.
        let stillSecret = (16..<64).allSatisfy { pointer!.load(fromByteOffset: $0, as: UInt8.self) == 0xA5 }
        #expect(!stillSecret)
    }

    @Test("Errors drain OpenSSL's queue into the error and leave it empty")
    func errorQueue() throws {
        #expect(throws: CryptoError.self) {
            try P256.PublicKey(derRepresentation: Data([0x30, 0x03, 0x02, 0x01, 0x01]))
        }
        #expect(OpenSSLErrorQueue.drain().isEmpty)
    }
}

@Suite("Prepared HMAC keys")
struct PreparedHMACKeyTests {
    @Test("A prepared key gives the same codes as the one-shot function, call after call")
    func preparedKeyMatchesOneShot() throws {
        let secret = try SecureBytes(randomCount: 32)
        let key = HMACSHA256.Key(secret)
        for message in ["", "a", String(repeating: "x", count: 1000)].map({ Data($0.utf8) }) {
            #expect(key.authenticationCode(for: message) == HMACSHA256.authenticationCode(for: message, using: secret))
            #expect(key.authenticationCode(for: message) == key.authenticationCode(for: message))
        }
        let jefe = HMACSHA256.Key(SecureBytes(Data("Jefe".utf8)))
        #expect(
            jefe.authenticationCode(for: Data("what do ya want for nothing?".utf8)).hex
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("Keys shorter than, as long as and longer than a SHA-256 block give the one-shot codes (RFC 4231 case 6)")
    func preparedKeysOfEveryLength() throws {
        for length in [0, 1, 31, 32, 63, 64, 65, 131, 200] {
            let secret = try SecureBytes(randomCount: length)
            let key = HMACSHA256.Key(secret)
            for message in ["", "la.index.v1", String(repeating: "y", count: 55), String(repeating: "z", count: 64)] {
                let bytes = Data(message.utf8)
                #expect(key.authenticationCode(for: bytes) == HMACSHA256.authenticationCode(for: bytes, using: secret))
            }
        }
        let long = HMACSHA256.Key(SecureBytes(Data(repeating: 0xaa, count: 131)))
        #expect(
            long.authenticationCode(for: Data("Test Using Larger Than Block-Size Key - Hash Key First".utf8)).hex
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}
