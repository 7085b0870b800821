import Foundation
import TestSupport
import Testing

@testable import SecureCrypto

@Suite("P-256 key encodings and ECDSA conversions")
struct KeyEncodingTests {
    @Test("Public keys export as 65-byte X9.63 and 91-byte DER, and import back to the same key")
    func publicRoundTrip() throws {
        let key = try P256.PrivateKey()
        let x963 = key.publicKey.x963Representation
        #expect(x963.count == 65 && x963.first == 0x04)
        let der = key.publicKey.derRepresentation
        #expect(der.count == 91)
        #expect(der.prefix(26).hex == "3059301306072a8648ce3d020106082a8648ce3d030107034200")
        #expect(try P256.PublicKey(x963Representation: x963) == key.publicKey)
        #expect(try P256.PublicKey(derRepresentation: der) == key.publicKey)
    }

    @Test("Private keys export as 97 bytes 04||X||Y||D and import back, signing for the same public key")
    func privateRoundTrip() throws {
        let key = try P256.PrivateKey()
        let exported = key.x963Representation
        #expect(exported.count == 97)
        let imported = try P256.PrivateKey(x963Representation: exported)
        #expect(imported.publicKey == key.publicKey)
        let signature = try imported.signature(for: Data("hello".utf8))
        #expect(key.publicKey.isValidSignature(signature, for: Data("hello".utf8)))
        #expect(try P256.PrivateKey(rawScalar: exported.slice(65..<97)).publicKey == key.publicKey)
    }

    @Test("Points off the curve, wrong lengths, compressed points and trailing DER bytes are refused")
    func badPublicKeys() throws {
        var point = try P256.PrivateKey().publicKey.x963Representation
        point[64] ^= 0x01
        #expect { try P256.PublicKey(x963Representation: point) } throws: { CryptoError.Code.pointNotOnCurve ~= $0 }
        #expect { try P256.PublicKey(x963Representation: point.prefix(64)) } throws: {
            CryptoError.Code.invalidKeyEncoding ~= $0
        }
        var compressed = Data(point.prefix(33))
        compressed[0] = 0x02
        #expect { try P256.PublicKey(x963Representation: compressed) } throws: {
            CryptoError.Code.invalidKeyEncoding ~= $0
        }
        let der = try P256.PrivateKey().publicKey.derRepresentation
        #expect { try P256.PublicKey(derRepresentation: der + [0]) } throws: {
            CryptoError.Code.invalidKeyEncoding ~= $0
        }
        #expect { try P256.PublicKey(derRepresentation: Data([0x30, 0x00])) } throws: {
            CryptoError.Code.invalidKeyEncoding ~= $0
        }
    }

    @Test("Scalars 0, n and above, and a scalar that does not match its point are refused")
    func badScalars() throws {
        let key = try P256.PrivateKey()
        let point = key.publicKey.x963Representation
        let zero = SecureBytes(point + Data(count: 32))
        #expect { try P256.PrivateKey(x963Representation: zero) } throws: { CryptoError.Code.invalidScalar ~= $0 }
        let order = SecureBytes(point + P256.order)
        #expect { try P256.PrivateKey(x963Representation: order) } throws: { CryptoError.Code.invalidScalar ~= $0 }
        let allOnes = SecureBytes(point + Data(repeating: 0xFF, count: 32))
        #expect { try P256.PrivateKey(x963Representation: allOnes) } throws: { CryptoError.Code.invalidScalar ~= $0 }
        let other = try P256.PrivateKey().x963Representation.slice(65..<97)
        let mismatched = SecureBytes(point).appending(other)
        #expect { try P256.PrivateKey(x963Representation: mismatched) } throws: { CryptoError.Code.invalidScalar ~= $0 }
        #expect { try P256.PrivateKey(x963Representation: SecureBytes(point)) } throws: {
            CryptoError.Code.invalidKeyEncoding ~= $0
        }
    }

    @Test("DER and raw signatures convert both ways and verify alike; message and digest forms agree")
    func signatureConversions() throws {
        let key = try P256.PrivateKey()
        let message = Data("sign me".utf8)
        let signature = try key.signature(for: message)
        let raw = try signature.rawRepresentation
        #expect(raw.count == 64)
        let back = try ECDSASignature(rawRepresentation: raw)
        #expect(back == signature)
        #expect(key.publicKey.isValidSignature(back, forDigest: SHA256.hash(message)))
        #expect(!key.publicKey.isValidSignature(signature, for: Data("sign me!".utf8)))
        #expect { try ECDSASignature(rawRepresentation: raw.prefix(63)) } throws: {
            CryptoError.Code.invalidSignatureEncoding ~= $0
        }
        #expect { try ECDSASignature(derRepresentation: signature.derRepresentation + [0]) } throws: {
            CryptoError.Code.invalidSignatureEncoding ~= $0
        }
    }

    @Test("A signature verifies with the openssl command-line tool on the exported public key")
    func opensslCLIVerifies() throws {
        let key = try P256.PrivateKey()
        let message = Data("verified by another implementation".utf8)
        let signature = try key.signature(for: message)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-ossl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try key.publicKey.derRepresentation.write(to: directory.appendingPathComponent("pub.der"))
        try message.write(to: directory.appendingPathComponent("msg"))
        try signature.derRepresentation.write(to: directory.appendingPathComponent("sig"))
        func verify(_ messageFile: String) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.currentDirectoryURL = directory
            process.arguments = [
                "dgst", "-sha256", "-verify", "pub.der", "-keyform", "DER", "-signature", "sig", messageFile,
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }
        #expect(try verify("msg") == 0)
        try Data("tampered".utf8).write(to: directory.appendingPathComponent("other"))
        #expect(try verify("other") != 0)
    }

    @Test("ECDH agrees from both sides, and the X9.63 KDF variant gives the requested size")
    func ecdhAgreement() throws {
        let alice = try P256.PrivateKey()
        let bob = try P256.PrivateKey()
        #expect(try alice.sharedSecret(with: bob.publicKey) == bob.sharedSecret(with: alice.publicKey))
        let derived = try alice.sharedSecret(
            with: bob.publicKey, x963SharedInfo: Data("info".utf8), outputByteCount: 48)
        #expect(derived.count == 48)
        #expect(
            derived
                == (try bob.sharedSecret(with: alice.publicKey, x963SharedInfo: Data("info".utf8), outputByteCount: 48))
        )
    }
}
