import Foundation

/// Apple's ECIES for P-256 (`SecKeyCreateEncryptedData` with the `eciesEncryption…X963SHA…AESGCM` algorithms),
/// byte-compatible with Security.framework:
///
/// 1. an ephemeral key pair (e, E); `E` = `04 || X || Y`;
/// 2. Z = ECDH(e, recipient);
/// 3. K = X9.63-KDF(Z, sharedInfo: E, 32 bytes for the variable-IV variant, 16 for the legacy one) with the
///    algorithm's hash (SHA-256 for the usual ones; SHA-1 only for the legacy variant, as Apple defines them);
/// 4. AES-128-GCM with key K[0..<16] and 16-byte IV K[16..<32] (legacy: 16 zero bytes), no associated data;
/// 5. output `E (65) || ciphertext || tag (16)`.
///
/// The Standard and Cofactor spellings are identical on P-256 (cofactor 1).
package enum ECIES {
    /// Which IV the algorithm uses, and which hash its KDF is built on.
    package struct Variant: Sendable, Hashable {
        /// Where the AES-GCM IV comes from.
        package enum IV: Sendable, Hashable {
            /// `…VariableIVX963SHA…AESGCM`: from the KDF (recommended).
            case fromKDF
            /// `…X963SHA…AESGCM` (legacy): 16 zero bytes.
            case zero
        }

        package var iv: IV
        package var digest: DigestAlgorithm

        package init(iv: IV, digest: DigestAlgorithm) {
            self.iv = iv
            self.digest = digest
        }

        /// `…VariableIVX963SHA256AESGCM`.
        package static let variableIV = Variant(iv: .fromKDF, digest: .sha256)
        /// `…X963SHA256AESGCM` (legacy).
        package static let zeroIV = Variant(iv: .zero, digest: .sha256)
    }

    /// Bytes added to the plaintext: the ephemeral public key and the tag.
    package static let overheadByteCount = P256.publicKeyByteCount + AESGCM.tagByteCount

    private static let symmetricKeyByteCount = 16

    /// Encrypts `plaintext` to `recipient`.
    ///
    /// - Parameter ephemeralKey: only for known-answer tests; leave nil so a fresh key is generated.
    package static func seal(
        _ plaintext: some ContiguousBytes, to recipient: P256.PublicKey, variant: Variant = .variableIV,
        ephemeralKey: P256.PrivateKey? = nil
    ) throws -> Data {
        let ephemeral = try ephemeralKey ?? P256.PrivateKey()
        let ephemeralPublic = ephemeral.publicKey.x963Representation
        let (key, nonce) = try keyAndNonce(
            sharedSecret: ephemeral.sharedSecret(with: recipient), ephemeralPublicKey: ephemeralPublic,
            variant: variant)
        let box = try AESGCM.seal(plaintext, using: key, nonce: nonce)
        return ephemeralPublic + box.ciphertext + box.tag
    }

    /// Decrypts `ciphertext` with the recipient's private key.
    ///
    /// - Throws: `invalidCiphertext` when the input is shorter than 81 bytes or its ephemeral key is not a P-256
    ///   point, `authenticationFailure` when the tag does not verify.
    package static func open(
        _ ciphertext: some ContiguousBytes, with key: some P256PrivateKeyOperations, variant: Variant = .variableIV
    ) throws -> SecureBytes {
        let data = ciphertext.withUnsafeBytes { Data($0) }
        guard data.count >= P256.publicKeyByteCount else {
            throw CryptoError(.invalidCiphertext, "ECIES: input too small for the ephemeral key")
        }
        guard data.count >= overheadByteCount else {
            throw CryptoError(.invalidCiphertext, "ECIES: input too short for the tag")
        }
        let start = data.startIndex
        let ephemeralBytes = Data(data[start..<(start + P256.publicKeyByteCount)])
        let ephemeral: P256.PublicKey
        do {
            ephemeral = try P256.PublicKey(x963Representation: ephemeralBytes)
        } catch {
            throw CryptoError(.invalidCiphertext, "ECIES: the ephemeral key is not a P-256 point")
        }
        let (symmetricKey, nonce) = try keyAndNonce(
            sharedSecret: key.sharedSecret(with: ephemeral), ephemeralPublicKey: ephemeralBytes, variant: variant)
        let box = try AESGCM.SealedBox(
            nonce: nonce,
            ciphertext: Data(data[(start + P256.publicKeyByteCount)..<(data.endIndex - AESGCM.tagByteCount)]),
            tag: Data(data[(data.endIndex - AESGCM.tagByteCount)...]))
        return try AESGCM.open(box, using: symmetricKey)
    }

    private static func keyAndNonce(
        sharedSecret: SecureBytes, ephemeralPublicKey: Data, variant: Variant
    ) throws -> (SecureBytes, AESGCM.Nonce) {
        switch variant.iv {
        case .fromKDF:
            let derived = try X963KDF.deriveKey(
                variant.digest, sharedSecret: sharedSecret, sharedInfo: ephemeralPublicKey,
                outputByteCount: 2 * symmetricKeyByteCount)
            let iv = derived.slice(symmetricKeyByteCount..<(2 * symmetricKeyByteCount)).unprotectedData()
            return (derived.slice(0..<symmetricKeyByteCount), try AESGCM.Nonce(iv))
        case .zero:
            let derived = try X963KDF.deriveKey(
                variant.digest, sharedSecret: sharedSecret, sharedInfo: ephemeralPublicKey,
                outputByteCount: symmetricKeyByteCount)
            return (derived, try AESGCM.Nonce(Data(count: 16)))
        }
    }
}
