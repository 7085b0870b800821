import Foundation
import SecureCrypto

/// The server's side of key attestation (see `TPMAttestation.swift` for the exchange).
///
/// What a verified attestation proves: the key is a P-256 key made inside a TPM (`fixedTPM`,
/// `sensitiveDataOrigin`), so its private part has never been outside that TPM and cannot be exported; and that
/// TPM holds an endorsement key certified by a CA the verifier trusts (or one it pinned). It does not prove what
/// the key's access-control list is: the engine, not the TPM, enforces it.
public struct TPMAttestationVerifier: Sendable {
    private let certificates: CertificateStore
    private let pinnedEndorsementKeys: Set<Data>

    /// - Parameters:
    ///   - trustedRoots: the manufacturers' root CA certificates (DER, or PEM with one or more certificates).
    ///   - intermediates: CA certificates between a root and the endorsement certificates (TPM makers publish them;
    ///     a TPM does not carry them).
    ///   - pinnedEndorsementKeys: endorsement keys (`TPMIdentity.endorsementKey`) accepted without a certificate,
    ///     for TPMs that have none and were enrolled some other way.
    /// - Throws: `TPMAttestationError` when a certificate does not parse.
    public init(trustedRoots: [Data], intermediates: [Data] = [], pinnedEndorsementKeys: [Data] = []) throws {
        certificates = try CertificateStore(roots: trustedRoots, intermediates: intermediates)
        self.pinnedEndorsementKeys = Set(pinnedEndorsementKeys)
    }

    /// Checks a TPM's identity and makes a challenge for it.
    ///
    /// - Returns: the challenge for the client, and what to keep until its answer (use each once: it is the
    ///   nonce that makes a recorded answer useless).
    /// - Throws: `TPMAttestationError` when the endorsement key is not certified by a trusted CA (nor pinned), is
    ///   not the key the certificate names, or the attestation key is not a restricted P-256 signing key fixed to
    ///   the TPM.
    public func challenge(
        for identity: TPMIdentity
    ) throws -> (challenge: TPMAttestationChallenge, expectation: TPMAttestationExpectation) {
        let endorsementKey = try TPMPublicArea(identity.endorsementKey)
        try Self.checkEndorsementTemplate(endorsementKey)
        if let certificate = identity.endorsementCertificate {
            let certified = try certificates.verifiedRSAModulus(of: certificate)
            guard certified == endorsementKey.unique[0] else {
                throw TPMAttestationError("the endorsement certificate is for another key")
            }
        } else if !pinnedEndorsementKeys.contains(identity.endorsementKey) {
            throw TPMAttestationError("the TPM has no endorsement certificate and its endorsement key is not pinned")
        }
        let attestationKey = try TPMPublicArea(identity.attestationKey)
        guard attestationKey.type == TPMPublicArea.ecc, attestationKey.p256PublicKey != nil,
            attestationKey.has(
                TPMPublicArea.fixedTPM | TPMPublicArea.fixedParent | TPMPublicArea.sensitiveDataOrigin
                    | TPMPublicArea.restricted | TPMPublicArea.sign),
            attestationKey.attributes & (TPMPublicArea.decrypt | TPMPublicArea.adminWithPolicy) == 0,
            attestationKey.authPolicy.isEmpty,
            attestationKey.scheme == (TPMPublicArea.ecdsa, TPMPublicArea.sha256)
        else {
            throw TPMAttestationError("the attestation key is not a restricted P-256 ECDSA key fixed to its TPM")
        }
        let credential = try SecureRandom.bytes(32)
        let challenge = try CredentialProtection.makeCredential(
            credential, name: try attestationKey.name(), endorsementModulus: endorsementKey.unique[0])
        return (
            challenge,
            TPMAttestationExpectation(
                credential: credential, attestationKey: attestationKey.p256PublicKey!,
                endorsementCertificate: identity.endorsementCertificate)
        )
    }

    /// Checks the answer to a challenge.
    ///
    /// - Returns: the attested key.
    /// - Throws: `TPMAttestationError` when the signature is not the attestation key's, the statement is not a
    ///   TPM-made certification of this key with the challenge's credential, or the key is not a P-256 key made in
    ///   the TPM and fixed to it.
    public func verify(
        _ attestation: TPMKeyAttestation, expecting expectation: TPMAttestationExpectation
    ) throws -> TPMAttestedKey {
        guard let signer = try? P256.PublicKey(x963Representation: expectation.attestationKey),
            let signature = try? ECDSASignature(rawRepresentation: attestation.signature),
            signer.isValidSignature(signature, for: attestation.statement)
        else { throw TPMAttestationError("the statement is not signed by the TPM's attestation key") }
        let statement = try TPMCertifyStatement(attestation.statement)
        guard statement.magic == TPMCertifyStatement.generatedValue else {
            throw TPMAttestationError("the statement was not made by the TPM")
        }
        guard constantTimeEquals(statement.extraData, expectation.credential) else {
            throw TPMAttestationError("the statement answers another challenge")
        }
        let key = try TPMPublicArea(attestation.keyPublicArea)
        guard statement.certifiedName == (try key.name()) else {
            throw TPMAttestationError("the statement certifies another key")
        }
        guard let publicKey = key.p256PublicKey, (try? P256.PublicKey(x963Representation: publicKey)) != nil,
            key.has(
                TPMPublicArea.fixedTPM | TPMPublicArea.fixedParent | TPMPublicArea.sensitiveDataOrigin
                    | TPMPublicArea.sign)
        else { throw TPMAttestationError("the key is not a P-256 signing key made in the TPM and fixed to it") }
        return TPMAttestedKey(publicKey: publicKey, endorsementCertificate: expectation.endorsementCertificate)
    }

    /// The TCG EK template L-1 (RSA-2048, restricted decryption, AES-128-CFB, SHA-256 names): the only one
    /// `challenge(for:)` encrypts to.
    private static func checkEndorsementTemplate(_ key: TPMPublicArea) throws {
        guard key.type == TPMPublicArea.rsa, key.nameAlgorithm == TPMPublicArea.sha256, key.keyBitsOrCurve == 2048,
            key.exponent == 0 || key.exponent == 65537, key.unique[0].count == 256,
            key.has(TPMPublicArea.fixedTPM | TPMPublicArea.restricted | TPMPublicArea.decrypt),
            key.symmetric == (TPMPublicArea.aes, 128, TPMPublicArea.cfb)
        else { throw TPMAttestationError("the endorsement key is not an RSA-2048 key of the TCG template L-1") }
    }
}

/// What a verifier keeps between its challenge and the answer: the credential (the nonce) and the attestation key.
public struct TPMAttestationExpectation: Sendable, Equatable {
    let credential: Data
    let attestationKey: Data
    let endorsementCertificate: Data?
}

/// A key a TPM attested.
public struct TPMAttestedKey: Sendable, Equatable {
    /// The key's public key, `04 || X || Y`.
    public var publicKey: Data
    /// The certificate of the TPM's endorsement key (DER), nil for a pinned one.
    public var endorsementCertificate: Data?
}
