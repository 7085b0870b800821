internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// An ECDSA P-256 signature, held in DER (X9.62 `SEQUENCE { r INTEGER, s INTEGER }`) and convertible to and from
/// the raw `r || s` form (RFC 4754 / IEEE P1363, 64 bytes).
package struct ECDSASignature: Sendable, Equatable {
    /// The DER encoding, as `…MessageX962SHA256` produces it (70–72 bytes for P-256).
    package let derRepresentation: Data

    /// Accepts a strict DER signature: the bytes must re-encode identically (no BER leniency, no trailing bytes).
    ///
    /// - Throws: `invalidSignatureEncoding`.
    package init(derRepresentation der: some ContiguousBytes) throws {
        let data = der.withUnsafeBytes { Data($0) }
        let canonical: Data? = data.withUnsafeBytes { bytes in
            guard bytes.count > 0, bytes.count <= 256 else { return nil }
            var cursor: UnsafePointer<UInt8>? = bytes.nonNilBytes
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, bytes.count) else { return nil }
            defer { ECDSA_SIG_free(signature) }
            return ECDSASignature.encode(signature)
        }
        guard let canonical, canonical == data else {
            OpenSSLErrorQueue.clear()
            throw CryptoError(.invalidSignatureEncoding, "not a DER ECDSA signature")
        }
        derRepresentation = canonical
    }

    /// Wraps bytes that OpenSSL's encoder produced.
    init(trustedDER der: Data) {
        derRepresentation = der
    }

    /// Accepts raw `r || s`, 32 bytes each.
    ///
    /// - Throws: `invalidSignatureEncoding` when the input is not 64 bytes.
    package init(rawRepresentation raw: some ContiguousBytes) throws {
        let data = raw.withUnsafeBytes { Data($0) }
        guard data.count == 2 * P256.coordinateByteCount else {
            throw CryptoError(.invalidSignatureEncoding, "a raw P-256 signature is 64 bytes, got \(data.count)")
        }
        let der: Data? = data.withUnsafeBytes { bytes in
            guard let signature = ECDSA_SIG_new() else { return nil }
            defer { ECDSA_SIG_free(signature) }
            let base = bytes.bindMemory(to: UInt8.self).baseAddress!
            guard let r = BN_bin2bn(base, 32, nil) else { return nil }
            guard let s = BN_bin2bn(base + 32, 32, nil) else {
                BN_free(r)
                return nil
            }
            guard ECDSA_SIG_set0(signature, r, s) == 1 else {
                BN_free(r)
                BN_free(s)
                return nil
            }
            return ECDSASignature.encode(signature)
        }
        guard let der else { throw CryptoError.drainingQueue(.internalFailure, "could not encode the signature") }
        derRepresentation = der
    }

    /// `r || s`, 32 bytes each.
    ///
    /// - Throws: `invalidSignatureEncoding` when r or s does not fit in 32 bytes (not a P-256 signature).
    package var rawRepresentation: Data {
        get throws {
            try derRepresentation.withUnsafeBytes { bytes in
                var cursor: UnsafePointer<UInt8>? = bytes.nonNilBytes
                guard let signature = d2i_ECDSA_SIG(nil, &cursor, bytes.count) else {
                    throw CryptoError.drainingQueue(.invalidSignatureEncoding, "not a DER ECDSA signature")
                }
                defer { ECDSA_SIG_free(signature) }
                var raw = [UInt8](repeating: 0, count: 64)
                let r = ECDSA_SIG_get0_r(signature)
                let s = ECDSA_SIG_get0_s(signature)
                guard BN_bn2binpad(r, &raw, 32) == 32 else {
                    throw CryptoError(.invalidSignatureEncoding, "r does not fit in 32 bytes")
                }
                let wroteS = raw.withUnsafeMutableBufferPointer { BN_bn2binpad(s, $0.baseAddress! + 32, 32) }
                guard wroteS == 32 else { throw CryptoError(.invalidSignatureEncoding, "s does not fit in 32 bytes") }
                return Data(raw)
            }
        }
    }

    private static func encode(_ signature: OpaquePointer) -> Data? {
        var output: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_ECDSA_SIG(signature, &output)
        guard length > 0, let output else { return nil }
        defer { la_openssl_free(output) }
        return Data(bytes: output, count: Int(length))
    }
}

extension P256.PrivateKey {
    /// Signs the SHA-256 digest of `message` (Apple's `ecdsaSignatureMessageX962SHA256`).
    package func signature(for message: some ContiguousBytes) throws -> ECDSASignature {
        try signature(forDigest: SHA256.hash(message))
    }

    /// Signs a precomputed digest (Apple's `ecdsaSignatureDigestX962…`). The digest is used as given; OpenSSL
    /// truncates one longer than 32 bytes, as ECDSA specifies.
    ///
    /// - Throws: `invalidParameter` for an empty digest or one over 64 bytes.
    package func signature(forDigest digest: some ContiguousBytes) throws -> ECDSASignature {
        try digest.withUnsafeBytes { digest in
            guard digest.count > 0, digest.count <= 64 else {
                throw CryptoError(.invalidParameter, "an ECDSA digest must be 1...64 bytes, not \(digest.count)")
            }
            return try backing.withSigningContext { ctx in
                var der = Data(count: 80)
                var length = der.count
                let signed = der.withUnsafeMutableBytes {
                    EVP_PKEY_sign(
                        ctx, $0.bindMemory(to: UInt8.self).baseAddress, &length, digest.nonNilBytes, digest.count)
                }
                guard signed == 1 else { throw CryptoError.drainingQueue(.internalFailure, "ECDSA signing failed") }
                der.count = length
                // OpenSSL's own encoder wrote these bytes: they are DER by construction.
                return ECDSASignature(trustedDER: der)
            }
        }
    }
}

extension P256.PublicKey {
    /// Whether `signature` is valid for the SHA-256 digest of `message`.
    package func isValidSignature(_ signature: ECDSASignature, for message: some ContiguousBytes) -> Bool {
        isValidSignature(signature, forDigest: SHA256.hash(message))
    }

    /// Whether `signature` is valid for a precomputed digest.
    package func isValidSignature(_ signature: ECDSASignature, forDigest digest: some ContiguousBytes) -> Bool {
        digest.withUnsafeBytes { digest in
            guard digest.count > 0, digest.count <= 64, let ctx = try? backing.makeContext() else { return false }
            defer { EVP_PKEY_CTX_free(ctx) }
            let result = signature.derRepresentation.withUnsafeBytes { sig in
                EVP_PKEY_verify_init(ctx) == 1
                    ? EVP_PKEY_verify(ctx, sig.nonNilBytes, sig.count, digest.nonNilBytes, digest.count) : -1
            }
            if result != 1 { OpenSSLErrorQueue.clear() }
            return result == 1
        }
    }
}
