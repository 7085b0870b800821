internal import COpenSSL
import Foundation

/// HMAC-SHA256 through OpenSSL's EVP_MAC interface.
package enum HMACSHA256 {
    package static let byteCount = 32

    /// The authentication code of `message` under `key`.
    package static func authenticationCode(for message: UnsafeRawBufferPointer, using key: SecureBytes) -> Data {
        authenticationCode(for: [message], using: key)
    }

    /// The authentication code of `message` under `key`.
    package static func authenticationCode(for message: some ContiguousBytes, using key: SecureBytes) -> Data {
        message.withUnsafeBytes { authenticationCode(for: [$0], using: key) }
    }

    /// The authentication code of the concatenation of `parts` under `key`.
    package static func authenticationCode(for parts: [UnsafeRawBufferPointer], using key: SecureBytes) -> Data {
        guard let ctx = EVP_MAC_CTX_new(OpenSSLAlgorithms.hmac) else { fatalError("HMAC: EVP_MAC_CTX_new failed") }
        defer { EVP_MAC_CTX_free(ctx) }
        var params = [
            OSSL_PARAM_construct_utf8_string(ParameterName.digest, ParameterName.sha256Name, 0),
            OSSL_PARAM_construct_end(),
        ]
        let initialized = key.withUnsafeBytes { EVP_MAC_init(ctx, $0.nonNilBytes, $0.count, &params) }
        precondition(initialized == 1, "HMAC: EVP_MAC_init failed")
        for part in parts where part.count > 0 {
            precondition(EVP_MAC_update(ctx, part.nonNilBytes, part.count) == 1, "HMAC: EVP_MAC_update failed")
        }
        var code = Data(count: byteCount)
        var length = 0
        let finished = code.withUnsafeMutableBytes {
            EVP_MAC_final(ctx, $0.bindMemory(to: UInt8.self).baseAddress, &length, byteCount)
        }
        precondition(finished == 1 && length == byteCount, "HMAC: EVP_MAC_final failed")
        return code
    }

    /// Whether `code` is the authentication code of `message` under `key`, compared in constant time.
    package static func isValidAuthenticationCode(
        _ code: some ContiguousBytes, for message: some ContiguousBytes, using key: SecureBytes
    ) -> Bool {
        constantTimeEquals(authenticationCode(for: message, using: key), code)
    }
}
