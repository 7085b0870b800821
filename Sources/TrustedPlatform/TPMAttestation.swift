import CTSS2
import CTSS2Templates
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

/// What a verifier needs to challenge this TPM (see the `KeyAttestation` module): the endorsement key's
/// certificate (the manufacturer's, when the TPM has one), the endorsement key's and the attestation key's public
/// areas (marshalled `TPMT_PUBLIC`).
package struct TPMEndorsement: Sendable, Equatable {
    /// DER; empty when the TPM holds no certificate for its RSA endorsement key.
    package var certificate: Data
    package var endorsementKey: Data
    package var attestationKey: Data
}

extension TPMConnection {
    /// The TPM's attestation key (see `la_tpm_ak_template`), loaded for this connection.
    ///
    /// - Returns: its handle, public key (`04 || X || Y`) and public area (marshalled `TPMT_PUBLIC`).
    package func attestationKey() throws -> (handle: TPMHandle, publicKey: Data, publicArea: Data) {
        var template = TPM2B_PUBLIC()
        la_tpm_ak_template(&template)
        let (handle, publicArea) = try createPrimary(
            in: ESYS_TR_RH_ENDORSEMENT, template: &template, operation: "make the TPM's attestation key")
        return (handle, Self.x963(publicArea.publicArea.unique.ecc), try Self.marshalledArea(publicArea))
    }

    /// The endorsement key (`la_tpm_ek_rsa_template`), loaded for this connection, and its public area.
    package func endorsementKey() throws -> (handle: TPMHandle, publicArea: Data) {
        var template = TPM2B_PUBLIC()
        la_tpm_ek_rsa_template(&template)
        let (handle, publicArea) = try createPrimary(
            in: ESYS_TR_RH_ENDORSEMENT, template: &template, operation: "make the TPM's endorsement key")
        return (handle, try Self.marshalledArea(publicArea))
    }

    /// The certificate of the RSA endorsement key from the TPM's NV memory (DER), or nil when there is none.
    package func endorsementCertificate() throws -> Data? {
        var index: ESYS_TR = ESYS_TR_NONE
        guard
            Esys_TR_FromTPMPublic(
                context, la_tpm_ek_rsa_certificate_index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &index) == 0
        else { return nil }
        defer { _ = Esys_TR_Close(context, &index) }
        var nvPublic: UnsafeMutablePointer<TPM2B_NV_PUBLIC>?
        var nvName: UnsafeMutablePointer<TPM2B_NAME>?
        let rc = Esys_NV_ReadPublic(context, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nvPublic, &nvName)
        defer {
            Esys_Free(nvPublic)
            Esys_Free(nvName)
        }
        guard rc == 0, let nvPublic else {
            throw TPMError(code: rc, operation: "read the endorsement certificate's size")
        }
        let size = Int(nvPublic.pointee.nvPublic.dataSize)
        var certificate = Data()
        // 512 bytes a read: within every TPM's TPM2_PT_NV_BUFFER_MAX.
        while certificate.count < size {
            let chunk = UInt16(min(512, size - certificate.count))
            var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
            let read = Esys_NV_Read(
                context, index, index, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, chunk, UInt16(certificate.count),
                &data)
            defer { Esys_Free(data) }
            guard read == 0, let data else { throw TPMError(code: read, operation: "read the endorsement certificate") }
            certificate.append(contentsOf: bytesOfTPM2B(data))
        }
        return certificate
    }

    /// What a verifier needs to make a credential challenge for this TPM.
    package func endorsement() throws -> TPMEndorsement {
        let certificate = try endorsementCertificate() ?? Data()
        let endorsement = try endorsementKey()
        flush(endorsement.handle)
        let attestation = try attestationKey()
        flush(attestation.handle)
        return TPMEndorsement(
            certificate: certificate, endorsementKey: endorsement.publicArea, attestationKey: attestation.publicArea)
    }

    /// `TPM2_ActivateCredential`: the TPM opens a credential a verifier encrypted to its endorsement key for the
    /// object named `attestationKey`'s name, and gives it back only when that object is loaded here. The
    /// endorsement key is used through its policy (a `PolicySecret` of the endorsement hierarchy).
    ///
    /// - Parameters:
    ///   - credentialBlob: the `TPM2B_ID_OBJECT`'s contents (integrity HMAC and encrypted credential).
    ///   - encryptedSecret: the `TPM2B_ENCRYPTED_SECRET`'s contents (the seed, RSA-OAEP to the endorsement key).
    package func activateCredential(
        _ credentialBlob: Data, encryptedSecret: Data, attestationKey: TPMHandle
    ) throws -> Data {
        var blob = TPM2B_ID_OBJECT()
        try credentialBlob.withUnsafeBytes { try setTPM2B(&blob, $0) }
        var secret = TPM2B_ENCRYPTED_SECRET()
        try encryptedSecret.withUnsafeBytes { try setTPM2B(&secret, $0) }
        let endorsement = try endorsementKey()
        defer { flush(endorsement.handle) }
        let policy = try endorsementPolicySession()
        var credential: UnsafeMutablePointer<TPM2B_DIGEST>?
        let rc = Esys_ActivateCredential(
            context, attestationKey, endorsement.handle, ESYS_TR_PASSWORD, policy, ESYS_TR_NONE, &blob, &secret,
            &credential)
        defer { Esys_Free(credential) }
        flush(policy)
        guard rc == 0, let credential else { throw TPMError(code: rc, operation: TPMError.activation) }
        return Data(bytesOfTPM2B(credential))
    }

    /// A policy session that satisfies the endorsement key's policy: `PolicySecret` with the endorsement
    /// hierarchy's (empty) authorization. It is used up by the command it authorizes.
    private func endorsementPolicySession() throws -> TPMHandle {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_NULL
        var session: ESYS_TR = ESYS_TR_NONE
        let started = Esys_StartAuthSession(
            context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nil, TPM2_SE_POLICY,
            &symmetric, TPM2_ALG_SHA256, &session)
        guard started == 0 else { throw TPMError(code: started, operation: "start a policy session") }
        track(session)
        var timeout: UnsafeMutablePointer<TPM2B_TIMEOUT>?
        var ticket: UnsafeMutablePointer<TPMT_TK_AUTH>?
        let rc = Esys_PolicySecret(
            context, ESYS_TR_RH_ENDORSEMENT, session, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, nil, nil, nil, 0,
            &timeout, &ticket)
        Esys_Free(timeout)
        Esys_Free(ticket)
        guard rc == 0 else { throw TPMError(code: rc, operation: "satisfy the endorsement key's policy") }
        return session
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

    /// The whole answer to a verifier's challenge for `object`: the attestation key recovers the challenge's
    /// credential (proving it lives beside the certified endorsement key), then certifies the key with that
    /// credential as nonce. Objects are loaded one after another within the three transient slots of the smallest
    /// TPMs.
    package func attest(
        _ object: TPMObject, authorization: SecureBytes, credentialBlob: Data, encryptedSecret: Data
    ) throws -> TPMCertification {
        let attestation = try attestationKey()
        defer { flush(attestation.handle) }
        let credential = try activateCredential(
            credentialBlob, encryptedSecret: encryptedSecret, attestationKey: attestation.handle)
        let key = try load(object, authorization: authorization)
        defer { flush(key) }
        return try certify(key, with: attestation.handle, nonce: credential)
    }

    private static func marshalledArea(_ value: TPM2B_PUBLIC) throws -> Data {
        var area = value.publicArea
        return try marshal(&area, Tss2_MU_TPMT_PUBLIC_Marshal)
    }
}
