internal import COpenSSL

/// An error from the crypto core.
///
/// Carries a ``Code`` that callers match on (`catch let error where CryptoError.Code.invalidKey ~= error`), a short
/// message that never contains key material, and the reasons OpenSSL left in its error queue (drained, never printed).
package struct CryptoError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, as a stable number; new codes can be added without breaking callers.
    package struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        package var rawValue: Int
        package init(rawValue: Int) { self.rawValue = rawValue }

        /// A key's bytes have the wrong length or format.
        package static let invalidKeyEncoding = Code(rawValue: 1)
        /// A public point is not on the P-256 curve (or is the point at infinity).
        package static let pointNotOnCurve = Code(rawValue: 2)
        /// A private scalar is zero or not below the group order, or does not match its public point.
        package static let invalidScalar = Code(rawValue: 3)
        /// A signature is not a valid DER or raw encoding.
        package static let invalidSignatureEncoding = Code(rawValue: 4)
        /// An AEAD tag did not verify: wrong key, nonce, associated data, or tampered ciphertext.
        package static let authenticationFailure = Code(rawValue: 5)
        /// A size or parameter is outside what the algorithm accepts.
        package static let invalidParameter = Code(rawValue: 6)
        /// The system's random generator failed.
        package static let randomFailure = Code(rawValue: 7)
        /// OpenSSL failed for a reason that is not the caller's input.
        package static let internalFailure = Code(rawValue: 8)
        /// A ciphertext is too short or malformed to be opened.
        package static let invalidCiphertext = Code(rawValue: 9)

        package var description: String {
            switch self {
            case .invalidKeyEncoding: "invalidKeyEncoding"
            case .pointNotOnCurve: "pointNotOnCurve"
            case .invalidScalar: "invalidScalar"
            case .invalidSignatureEncoding: "invalidSignatureEncoding"
            case .authenticationFailure: "authenticationFailure"
            case .invalidParameter: "invalidParameter"
            case .randomFailure: "randomFailure"
            case .internalFailure: "internalFailure"
            case .invalidCiphertext: "invalidCiphertext"
            default: "code \(rawValue)"
            }
        }

        /// Matches an error thrown by the crypto core against a code.
        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? CryptoError)?.code == code
        }
    }

    package var code: Code
    package var message: String
    /// OpenSSL's reasons, oldest first, as `library:function:reason` strings.
    package var openSSLReasons: [String]

    package init(_ code: Code, _ message: String, openSSLReasons: [String] = []) {
        self.code = code
        self.message = message
        self.openSSLReasons = openSSLReasons
    }

    /// Builds an error and drains OpenSSL's thread-local error queue into it.
    static func drainingQueue(_ code: Code, _ message: String) -> CryptoError {
        CryptoError(code, message, openSSLReasons: OpenSSLErrorQueue.drain())
    }

    package var description: String {
        openSSLReasons.isEmpty
            ? "CryptoError(\(code)): \(message)"
            : "CryptoError(\(code)): \(message) [\(openSSLReasons.joined(separator: "; "))]"
    }
}

/// OpenSSL's per-thread error queue.
enum OpenSSLErrorQueue {
    /// Empties the queue and returns its entries; nothing is printed.
    static func drain() -> [String] {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            if reasons.count < 8 {
                reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return reasons
    }

    /// Forgets whatever is in the queue (used after an expected failure, such as a bad signature).
    static func clear() {
        ERR_clear_error()
    }
}
