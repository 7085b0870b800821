import Foundation

// Key attestation for TPM-held keys: our addition (Apple platforms attest keys through App Attest and managed
// device attestation, which have no Linux counterpart). The exchange takes two messages each way:
//
// 1. The client sends its TPM's identity (`TPMIdentity`: the endorsement key's certificate and public area, the
//    attestation key's public area): `SecKey.tpmIdentity()` or `LAPrivateKey.tpmIdentity()`, `lactl keys identity`.
// 2. The server checks it (`TPMAttestationVerifier.challenge(for:)`): the certificate chains to a manufacturer's
//    CA it trusts, and the attestation key is a restricted signing key that cannot leave a TPM. It answers with a
//    credential encrypted to the endorsement key for the attestation key's name (`TPMAttestationChallenge`).
// 3. The client's TPM opens the credential, which it does only when the attestation key is loaded beside that
//    endorsement key, and certifies the key with the credential as nonce: `SecKey.tpmAttestation(answering:)`,
//    `LAPrivateKey.tpmAttestation(answering:)`, `lactl keys attest`.
// 4. The server checks the certification (`TPMAttestationVerifier.verify(_:expecting:)`) and learns the key's
//    public key, now known to be a P-256 key made inside that TPM that no one can export.
//
// Every value is `Codable` (JSON with base64 fields) for carrying it over whatever the two sides speak.

/// A TPM as a verifier first sees it.
public struct TPMIdentity: Codable, Sendable, Equatable {
    /// The RSA-2048 endorsement key's certificate from the TPM's NV memory (DER), or nil when the TPM has none
    /// (the verifier must then know the endorsement key itself).
    public var endorsementCertificate: Data?
    /// The endorsement key's public area (a marshalled `TPMT_PUBLIC`, TCG EK template L-1).
    public var endorsementKey: Data
    /// The attestation key's public area (a marshalled `TPMT_PUBLIC`: ECC P-256, restricted signing, fixed to
    /// the TPM).
    public var attestationKey: Data

    /// An identity with these parts.
    public init(endorsementCertificate: Data?, endorsementKey: Data, attestationKey: Data) {
        self.endorsementCertificate = endorsementCertificate
        self.endorsementKey = endorsementKey
        self.attestationKey = attestationKey
    }
}

/// A verifier's challenge: a credential only the TPM of a `TPMIdentity` can open, and only for its attestation key.
public struct TPMAttestationChallenge: Codable, Sendable, Equatable {
    /// The `TPM2B_ID_OBJECT`'s contents: the integrity HMAC, then the encrypted credential.
    public var credentialBlob: Data
    /// The `TPM2B_ENCRYPTED_SECRET`'s contents: the seed, RSA-OAEP-encrypted to the endorsement key.
    public var encryptedSecret: Data

    /// A challenge with these parts.
    public init(credentialBlob: Data, encryptedSecret: Data) {
        self.credentialBlob = credentialBlob
        self.encryptedSecret = encryptedSecret
    }
}

/// The TPM's answer to a challenge for one key.
public struct TPMKeyAttestation: Codable, Sendable, Equatable {
    /// The certified key's public area (a marshalled `TPMT_PUBLIC`).
    public var keyPublicArea: Data
    /// The `TPMS_ATTEST` the attestation key signed: the key's name, with the challenge's credential as nonce.
    public var statement: Data
    /// The attestation key's ECDSA P-256 signature over SHA-256 of `statement`: `r || s`, 32 bytes each.
    public var signature: Data

    /// An attestation with these parts.
    public init(keyPublicArea: Data, statement: Data, signature: Data) {
        self.keyPublicArea = keyPublicArea
        self.statement = statement
        self.signature = signature
    }
}

/// Why a verifier refused an identity or an attestation. The message names the check that failed.
public struct TPMAttestationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The check that failed, in words.
    public var description: String

    init(_ description: String) { self.description = description }
}
