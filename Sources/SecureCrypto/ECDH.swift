internal import COpenSSL
import Foundation

extension P256.PrivateKey {
    /// Raw ECDH: the x-coordinate of `d · Q`, 32 bytes (Apple's `ecdhKeyExchangeStandard`; `…Cofactor` is the same
    /// on P-256, whose cofactor is 1).
    ///
    /// - Throws: `pointNotOnCurve` when OpenSSL rejects the peer key.
    package func sharedSecret(with peer: P256.PublicKey) throws -> SecureBytes {
        let ctx = try backing.makeContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1 else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_PKEY_derive_init failed")
        }
        // The peer was fully checked when it was imported (`PublicKey` cannot hold an invalid point), so the
        // check OpenSSL would repeat here, a scalar multiplication, is skipped.
        guard EVP_PKEY_derive_set_peer_ex(ctx, peer.backing.pointer, 0) == 1 else {
            throw CryptoError.drainingQueue(.pointNotOnCurve, "the peer key is not usable for P-256 ECDH")
        }
        return try SecureBytes(count: P256.coordinateByteCount) { out in
            var length = out.count
            guard EVP_PKEY_derive(ctx, out.baseAddress!.assumingMemoryBound(to: UInt8.self), &length) == 1,
                length == P256.coordinateByteCount
            else {
                throw CryptoError.drainingQueue(.internalFailure, "ECDH derivation failed")
            }
        }
    }

}

/// A P-256 private key wherever it lives: in this process's memory (`P256.PrivateKey`) or inside a TPM. Apple's
/// formats built on ECDH (ECIES, X9.63 key exchange) take any of them: only the point multiplication happens where
/// the key is.
package protocol P256PrivateKeyOperations {
    /// ECDSA over a precomputed digest (1…64 bytes; longer than 32 is cut to its first 32, as ECDSA specifies).
    func signature(forDigest digest: some ContiguousBytes) throws -> ECDSASignature
    /// Raw ECDH: the x-coordinate of `d · Q`, 32 bytes.
    func sharedSecret(with peer: P256.PublicKey) throws -> SecureBytes
}

extension P256.PrivateKey: P256PrivateKeyOperations {}

extension P256PrivateKeyOperations {
    /// ECDH followed by the ANSI X9.63 KDF with `digest` (Apple's `ecdhKeyExchangeStandardX963SHA256` and its
    /// SHA-1, SHA-224, SHA-384 and SHA-512 siblings).
    package func sharedSecret(
        with peer: P256.PublicKey, x963SharedInfo sharedInfo: Data, outputByteCount: Int,
        digest: DigestAlgorithm = .sha256
    ) throws -> SecureBytes {
        try X963KDF.deriveKey(
            digest, sharedSecret: sharedSecret(with: peer), sharedInfo: sharedInfo, outputByteCount: outputByteCount)
    }
}
