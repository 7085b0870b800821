internal import COpenSSL
import Foundation

/// HKDF with SHA-256 (RFC 5869) through OpenSSL's EVP_KDF interface.
package enum HKDFSHA256 {
    /// The largest output HKDF-SHA256 can produce: 255 blocks of 32 bytes.
    package static let maximumOutputByteCount = 255 * 32

    /// Extract-then-expand: `outputByteCount` bytes from `inputKeyMaterial`, `salt` and `info`.
    ///
    /// - Throws: `CryptoError.invalidParameter` when `outputByteCount` is 0 or above 8160.
    package static func deriveKey(
        inputKeyMaterial: SecureBytes, salt: Data = Data(), info: Data = Data(), outputByteCount: Int
    ) throws -> SecureBytes {
        guard outputByteCount > 0, outputByteCount <= maximumOutputByteCount else {
            throw CryptoError(.invalidParameter, "HKDF-SHA256 output must be 1...8160 bytes, not \(outputByteCount)")
        }
        guard let ctx = EVP_KDF_CTX_new(OpenSSLAlgorithms.hkdf) else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_KDF_CTX_new(HKDF) failed")
        }
        defer { EVP_KDF_CTX_free(ctx) }
        return try inputKeyMaterial.withUnsafeBytes { ikm in
            try salt.withNonNilBytes { saltBytes, saltCount in
                try info.withNonNilBytes { infoBytes, infoCount in
                    var params = [
                        OSSL_PARAM_construct_utf8_string(ParameterName.digest, ParameterName.sha256Name, 0),
                        OSSL_PARAM_construct_octet_string(
                            ParameterName.key, UnsafeMutableRawPointer(mutating: ikm.nonNilBytes), ikm.count),
                        OSSL_PARAM_construct_octet_string(
                            ParameterName.salt, UnsafeMutableRawPointer(mutating: saltBytes), saltCount),
                        OSSL_PARAM_construct_octet_string(
                            ParameterName.info, UnsafeMutableRawPointer(mutating: infoBytes), infoCount),
                        OSSL_PARAM_construct_end(),
                    ]
                    return try SecureBytes(count: outputByteCount) { output in
                        guard
                            EVP_KDF_derive(
                                ctx, output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, &params)
                                == 1
                        else {
                            throw CryptoError.drainingQueue(.internalFailure, "HKDF-SHA256 derivation failed")
                        }
                    }
                }
            }
        }
    }
}
