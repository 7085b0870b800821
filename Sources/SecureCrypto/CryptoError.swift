internal import COpenSSL

/// An error from the crypto core.
///
/// Carries a ``Code`` that callers match on (`catch let error where CryptoError.Code.invalidKey ~= error`), a short
/// message that never contains key material, and the reasons OpenSSL left in its error queue (drained, never printed).
package struct CryptoError: CodedError, CustomStringConvertible, Sendable {
    /// What went wrong, as a stable number; new codes can be added without breaking callers.
    package typealias Code = ErrorCode<CryptoError>

    /// The code's name, e.g. `invalidKeyEncoding`.
    package static func name(of code: Code) -> String? {
        switch code {
        case .invalidKeyEncoding: "invalidKeyEncoding"
        case .pointNotOnCurve: "pointNotOnCurve"
        case .invalidScalar: "invalidScalar"
        case .invalidSignatureEncoding: "invalidSignatureEncoding"
        case .authenticationFailure: "authenticationFailure"
        case .invalidParameter: "invalidParameter"
        case .randomFailure: "randomFailure"
        case .internalFailure: "internalFailure"
        case .invalidCiphertext: "invalidCiphertext"
        default: nil
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

extension ErrorCode where Failure == CryptoError {
    /// A key's bytes have the wrong length or format.
    package static var invalidKeyEncoding: Self { Self(rawValue: 1) }
    /// A public point is not on the P-256 curve (or is the point at infinity).
    package static var pointNotOnCurve: Self { Self(rawValue: 2) }
    /// A private scalar is zero or not below the group order, or does not match its public point.
    package static var invalidScalar: Self { Self(rawValue: 3) }
    /// A signature is not a valid DER or raw encoding.
    package static var invalidSignatureEncoding: Self { Self(rawValue: 4) }
    /// An AEAD tag did not verify: wrong key, nonce, associated data, or tampered ciphertext.
    package static var authenticationFailure: Self { Self(rawValue: 5) }
    /// A size or parameter is outside what the algorithm accepts.
    package static var invalidParameter: Self { Self(rawValue: 6) }
    /// The system's random generator failed.
    package static var randomFailure: Self { Self(rawValue: 7) }
    /// OpenSSL failed for a reason that is not the caller's input.
    package static var internalFailure: Self { Self(rawValue: 8) }
    /// A ciphertext is too short or malformed to be opened.
    package static var invalidCiphertext: Self { Self(rawValue: 9) }
}
