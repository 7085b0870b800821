import CTSS2
import Foundation
import SecureCrypto

/// What `TPM2_Certify` returns: the TPM's statement that it holds a key of a given name, with the caller's nonce,
/// signed by the TPM's attestation key.
package struct TPMCertification: Sendable, Equatable {
    /// The marshalled `TPMS_ATTEST` (what the signature covers, hashed with SHA-256).
    package var attestation: Data
    /// The ECDSA signature over SHA-256 of `attestation`: `r` and `s`, 32 bytes each.
    package var signatureR: Data
    package var signatureS: Data
}

/// The fields of a `TPMS_ATTEST` a verifier checks.
package struct TPMAttestationStatement: Sendable, Equatable {
    /// `TPM_GENERATED_VALUE` (0xFF544347) when the TPM produced the structure itself.
    package var magic: UInt32
    /// `TPM_ST_ATTEST_CERTIFY` (0x8017) for a certification.
    package var type: UInt16
    /// The caller's nonce (`qualifyingData`).
    package var extraData: Data
    /// The certified object's name (`nameAlg || H(public area)`).
    package var certifiedName: Data

    package static let generatedValue: UInt32 = 0xFF54_4347
    package static let certifyType: UInt16 = 0x8017

    /// Parses a marshalled `TPMS_ATTEST`. - Throws: `TPMError` when it is not one.
    package init(_ attestation: Data) throws {
        var value = TPMS_ATTEST()
        try unmarshal(attestation, into: &value, Tss2_MU_TPMS_ATTEST_Unmarshal)
        magic = value.magic
        type = value.type
        extraData = withUnsafePointer(to: &value.extraData) { Data(bytesOfTPM2B($0)) }
        certifiedName = value.type == Self.certifyType
            ? withUnsafePointer(to: &value.attested.certify.name) { Data(bytesOfTPM2B($0)) } : Data()
    }
}

extension TPMObject {
    /// The object's name as the TPM computes it: the name algorithm (SHA-256, `00 0B`) and the SHA-256 of its
    /// public area.
    package var name: Data {
        Data([0x00, 0x0B]) + Data(SHA256.hash(publicArea.dropFirst(2)))
    }
}

extension TPMConnection {
    /// The TPM's attestation key (see `la_tpm_ak_template`), loaded for this connection.
    ///
    /// - Returns: its handle and public key (`04 || X || Y`).
    package func attestationKey() throws -> (handle: TPMHandle, publicKey: Data) {
        var template = TPM2B_PUBLIC()
        la_tpm_ak_template(&template)
        let (handle, publicArea) = try createPrimary(
            in: ESYS_TR_RH_ENDORSEMENT, template: &template, operation: "make the TPM's attestation key")
        return (handle, Self.x963(publicArea.publicArea.unique.ecc))
    }

    /// `TPM2_Certify`: the attestation key signs that `key` (loaded with its authorization) is in this TPM, with
    /// `nonce` (at most 64 bytes) as qualifying data.
    package func certify(_ key: TPMHandle, with attestationKey: TPMHandle, nonce: Data) throws -> TPMCertification {
        var qualifying = TPM2B_DATA()
        try nonce.withUnsafeBytes { try setTPM2B(&qualifying, $0) }
        var scheme = la_tpm_ecdsa_sha256()
        var attest: UnsafeMutablePointer<TPM2B_ATTEST>?
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        let rc = Esys_Certify(
            context, key, attestationKey, try keyed(), ESYS_TR_PASSWORD, ESYS_TR_NONE, &qualifying, &scheme, &attest,
            &signature)
        defer {
            Esys_Free(attest)
            Esys_Free(signature)
        }
        guard rc == 0, let attest, let signature else { throw TPMError(code: rc, operation: "certify a TPM key") }
        var ecdsa = signature.pointee.signature.ecdsa
        return TPMCertification(
            attestation: Data(bytesOfTPM2B(attest)), signatureR: Self.padded(&ecdsa.signatureR),
            signatureS: Self.padded(&ecdsa.signatureS))
    }
}
