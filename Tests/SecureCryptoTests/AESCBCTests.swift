import Foundation
import Testing

@testable import SecureCrypto

/// AES-256-CBC without padding, for CTAP's PIN/UV auth protocols: NIST SP 800-38A's CBC-AES256 example (F.2.5/F.2.6),
/// and the lengths it refuses.
@Suite("AES-256-CBC")
struct AESCBCTests {
    static let key = SecureBytes(hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"))
    static let iv = hex("000102030405060708090a0b0c0d0e0f")
    static let plaintext = hex(
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52ef"
            + "f69f2445df4f9b17ad2b417be66c3710")
    static let ciphertext = hex(
        "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d39f23369a9d9bacfa530e26304231461"
            + "b2eb05e2c39be9fcda6c19078c6a9d1b")

    static func hex(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map {
            let start = text.index(text.startIndex, offsetBy: $0)
            return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    @Test func encryptsAndDecryptsNISTsExample() throws {
        #expect(try AES256CBC.encrypt(SecureBytes(Self.plaintext), key: Self.key, iv: Self.iv) == Self.ciphertext)
        let decrypted = try AES256CBC.decrypt(Self.ciphertext, key: Self.key, iv: Self.iv)
        #expect(decrypted.unprotectedData() == Data(Self.plaintext))
        #expect(try AES256CBC.encrypt(SecureBytes(zeros: 0), key: Self.key, iv: Self.iv).isEmpty)
    }

    @Test func refusesPartialBlocksAndWrongKeyOrIVLengths() {
        #expect(throws: CryptoError.self) {
            try AES256CBC.decrypt(Array(Self.ciphertext.prefix(17)), key: Self.key, iv: Self.iv)
        }
        #expect(throws: CryptoError.self) {
            try AES256CBC.encrypt(SecureBytes(Self.plaintext), key: SecureBytes(zeros: 16), iv: Self.iv)
        }
        #expect(throws: CryptoError.self) {
            try AES256CBC.encrypt(SecureBytes(Self.plaintext), key: Self.key, iv: Array(Self.iv.prefix(8)))
        }
    }
}
