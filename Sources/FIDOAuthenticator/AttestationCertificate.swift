import Foundation
import SecureCrypto

/// A self-signed X.509 certificate for U2F's attestation (U2F's register answer must carry one): a P-256 key made
/// for one registration signs both the certificate and the registration, then is dropped. It claims nothing about
/// the device, as attestation `none` claims nothing, and no two registrations share a key, so it links none of
/// them (a batch key shared by every user of this software would be public in its source, and a key per user would
/// let sites follow the user).
struct AttestationCertificate {
    /// The key that signs the registration, whose public half the certificate holds.
    let key: P256.PrivateKey
    /// The certificate, DER.
    let der: [UInt8]

    /// A new key and its certificate, subject and issuer `CN=lactl fido U2F`, valid from `now` with no end
    /// (RFC 5280 §4.1.2.5's 99991231235959Z).
    init(now: Date = Date()) throws {
        key = try P256.PrivateKey()
        let ecdsaWithSHA256 = Self.sequence(Self.tlv(0x06, [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]))
        let name = Self.sequence(
            Self.tlv(
                0x31, Self.sequence(Self.tlv(0x06, [0x55, 0x04, 0x03]) + Self.tlv(0x0C, Array("lactl fido U2F".utf8)))))
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyMMddHHmmss'Z'"
        let validity = Self.sequence(
            Self.tlv(0x17, Array(formatter.string(from: now).utf8)) + Self.tlv(0x18, Array("99991231235959Z".utf8)))
        var serial = Array(try SecureRandom.bytes(8))
        serial[0] = (serial[0] & 0x7F) | 0x01  // positive, and no leading zero byte
        let tbs = Self.sequence(
            Self.tlv(0xA0, Self.tlv(0x02, [2])) + Self.tlv(0x02, serial) + ecdsaWithSHA256 + name + validity + name
                + Array(key.publicKey.derRepresentation))
        let signature = try key.signature(for: tbs).derRepresentation
        der = Self.sequence(tbs + ecdsaWithSHA256 + Self.tlv(0x03, [0] + Array(signature)))
    }

    /// One DER element: `tag`, the definite length, `content`.
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let count = content.count
        let length: [UInt8] =
            switch count {
            case ..<0x80: [UInt8(count)]
            case ..<0x100: [0x81, UInt8(count)]
            default: [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
            }
        return [tag] + length + content
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] { tlv(0x30, content) }
}
