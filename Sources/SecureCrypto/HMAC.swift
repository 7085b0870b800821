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
        guard let ctx = EVP_MAC_CTX_dup(digestTemplate.pointer) else { fatalError("HMAC: EVP_MAC_CTX_dup failed") }
        defer { EVP_MAC_CTX_free(ctx) }
        let initialized = key.withUnsafeBytes { EVP_MAC_init(ctx, $0.nonNilBytes, $0.count, nil) }
        precondition(initialized == 1, "HMAC: EVP_MAC_init failed")
        return finish(ctx, parts)
    }

    /// A key prepared once for many codes (the keychain's blind-index key): each code copies a context that already
    /// holds the digest and the key's inner and outer pads, instead of setting both up again.
    // Safe to share: the prepared context is never used directly, only copied with EVP_MAC_CTX_dup, which reads it.
    package final class Key: @unchecked Sendable {
        private let prepared: OpaquePointer

        package init(_ key: SecureBytes) {
            guard let ctx = EVP_MAC_CTX_dup(HMACSHA256.digestTemplate.pointer) else {
                fatalError("HMAC: EVP_MAC_CTX_dup failed")
            }
            let initialized = key.withUnsafeBytes { EVP_MAC_init(ctx, $0.nonNilBytes, $0.count, nil) }
            precondition(initialized == 1, "HMAC: EVP_MAC_init failed")
            prepared = ctx
        }

        deinit { EVP_MAC_CTX_free(prepared) }

        /// The authentication code of `message` under this key.
        package func authenticationCode(for message: some ContiguousBytes) -> Data {
            guard let ctx = EVP_MAC_CTX_dup(prepared) else { fatalError("HMAC: EVP_MAC_CTX_dup failed") }
            defer { EVP_MAC_CTX_free(ctx) }
            return message.withUnsafeBytes { HMACSHA256.finish(ctx, [$0]) }
        }
    }

    /// An HMAC context with SHA-256 already fetched and set, copied for every code so that no call looks the
    /// digest up by name again (about 2 µs each).
    // Safe to share: never used directly, only copied with EVP_MAC_CTX_dup, which reads it.
    final class Template: @unchecked Sendable {
        let pointer: OpaquePointer
        init() {
            guard let ctx = EVP_MAC_CTX_new(OpenSSLAlgorithms.hmac) else { fatalError("HMAC: EVP_MAC_CTX_new failed") }
            var params = [
                OSSL_PARAM_construct_utf8_string(ParameterName.digest, ParameterName.sha256Name, 0),
                OSSL_PARAM_construct_end(),
            ]
            precondition(EVP_MAC_CTX_set_params(ctx, &params) == 1, "HMAC: cannot select SHA-256")
            pointer = ctx
        }
    }

    static let digestTemplate = Template()

    private static func finish(_ ctx: OpaquePointer, _ parts: [UnsafeRawBufferPointer]) -> Data {
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
