import Foundation
import SSHAgentProtocol
import SecureCrypto

/// The SSH forms of an agent key: `ecdsa-sha2-nistp256` (RFC 5656 §3.1), the only curve an enclave key has.
enum SSHKey {
    static let algorithm = "ecdsa-sha2-nistp256"
    static let curve = "nistp256"

    /// The public key blob: string algorithm, string curve, string Q (the 65-byte uncompressed point).
    static func blob(publicKey point: Data) -> [UInt8] {
        var writer = SSHWriter()
        writer.string(algorithm)
        writer.string(curve)
        writer.string(point)
        return writer.bytes
    }

    /// The `authorized_keys` line: algorithm, base64 blob, comment.
    static func authorizedKeysLine(publicKey point: Data, comment: String) -> String {
        "\(algorithm) \(Data(blob(publicKey: point)).base64EncodedString()) \(comment)"
    }

    /// An SSH signature from an ECDSA signature in DER: string algorithm, string (mpint r, mpint s) (RFC 5656 §3.1.2).
    static func signature(der: Data) throws -> [UInt8] {
        let raw = try ECDSASignature(derRepresentation: der).rawRepresentation
        var inner = SSHWriter()
        inner.mpint(raw.prefix(32))
        inner.mpint(raw.suffix(32))
        var writer = SSHWriter()
        writer.string(algorithm)
        writer.string(inner.bytes)
        return writer.bytes
    }
}
