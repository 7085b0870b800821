internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// HMAC-SHA256 on OpenSSL 3: one-shot codes through the EVP_MAC interface; a prepared ``Key`` (the blind indexes,
/// the attempt records) from SHA-256 states kept after the key's pads.
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

    /// A key prepared once for many codes (the keychain's blind-index key, attempt records): the SHA-256 states
    /// after the key's inner and outer pads, so each code costs its message's compressions and two more, with no
    /// allocation and no context copied (about 3,000 instructions for a 60-byte message instead of 12,000).
    // Safe to share: the prepared states are written once, in init, and only read (copied) afterwards.
    package final class Key: @unchecked Sendable {
        private let prepared: UnsafeMutablePointer<la_hmac_sha256_key>

        package init(_ key: SecureBytes) {
            prepared = .allocate(capacity: 1)
            key.withUnsafeBytes {
                la_hmac_sha256_prepare(prepared, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count)
            }
        }

        deinit {
            // The states are as good as the key: wiped before the memory goes back.
            OPENSSL_cleanse(prepared, MemoryLayout<la_hmac_sha256_key>.size)
            prepared.deallocate()
        }

        /// The authentication code of `message` under this key.
        package func authenticationCode(for message: some ContiguousBytes) -> Data {
            message.withUnsafeBytes { authenticationCode(for: $0) }
        }

        /// The authentication code of `message` under this key.
        package func authenticationCode(for message: UnsafeRawBufferPointer) -> Data {
            var code = Data(count: HMACSHA256.byteCount)
            code.withUnsafeMutableBytes { authenticationCode(for: message, into: $0) }
            return code
        }

        /// Writes the authentication code of `message` under this key into `code` (``HMACSHA256/byteCount`` bytes).
        package func authenticationCode(for message: UnsafeRawBufferPointer, into code: UnsafeMutableRawBufferPointer) {
            precondition(code.count == HMACSHA256.byteCount, "HMAC: the code takes \(HMACSHA256.byteCount) bytes")
            la_hmac_sha256(
                prepared, message.baseAddress, message.count, code.baseAddress!.assumingMemoryBound(to: UInt8.self))
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
