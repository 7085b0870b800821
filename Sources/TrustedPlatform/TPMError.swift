import CTSS2

/// A failure talking to the TPM: the tpm2-tss response code and what was being done. Never holds key material.
package struct TPMError: Error, CustomStringConvertible, Sendable {
    /// The TSS2 response code (layer in the top byte, the TPM's own code below).
    package var code: UInt32
    /// What was asked of the TPM ("unseal the device key").
    package var operation: String

    package init(code: UInt32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// The TPM's response code with the handle, session and parameter numbers taken out, or nil when the failure
    /// came from a software layer (the TCTI, ESAPI) rather than the TPM.
    package var responseCode: UInt32? {
        guard code >> 16 == 0 else { return nil }
        return code & 0x80 != 0 ? code & 0xBF : code & 0x97F
    }

    /// The object does not belong under this parent: it was made by another TPM (or for another storage key), or
    /// its bytes were changed.
    package var isForeignObject: Bool {
        [Self.integrity, Self.binding, Self.keySize, Self.size, Self.value].contains(responseCode)
    }

    /// The authorization value was wrong.
    package var isAuthorizationFailure: Bool {
        responseCode == Self.authorizationFailed || responseCode == Self.badAuthorization
    }

    /// The TPM is in dictionary-attack lockout: too many wrong authorizations of objects it protects; it refuses
    /// every such object until its recovery time passes (or the lockout hierarchy resets it).
    package var isLockout: Bool { responseCode == Self.lockout }

    /// The TPM refused to open a key-attestation credential (it was made for another TPM or attestation key, or
    /// changed).
    package var isCredentialRefusal: Bool { operation == Self.activation && responseCode != nil }

    static let activation = "activate an attestation credential"

    /// The TPM refused the authorization of the object being unsealed and counted it towards its dictionary-attack
    /// lockout (TPM_RC_AUTH_FAIL from TPM2_Unseal itself): that object will refuse this authorization every time.
    /// Not a refusal while loading the object or making its parent (the owner hierarchy's own password, say).
    package var isCountedUnsealRefusal: Bool { operation == Self.unsealing && responseCode == Self.authorizationFailed }

    static let unsealing = "unseal a key"

    /// TSS2_MU_RC_BAD_SIZE: bytes that do not fit, or go on after, a TPM structure.
    static let badSize: UInt32 = 0x0009_0006

    /// The lock that shares a TPM without resource manager could not be taken (not a TSS2 code).
    static let lockFailed: UInt32 = 0xFFFF_0001

    static let integrity: UInt32 = 0x9F
    static let binding: UInt32 = 0xA5
    static let keySize: UInt32 = 0x87
    static let size: UInt32 = 0x95
    static let value: UInt32 = 0x84
    static let authorizationFailed: UInt32 = 0x8E
    static let badAuthorization: UInt32 = 0xA2
    /// TPM_RC_LOCKOUT (a warning).
    static let lockout: UInt32 = 0x921

    package var description: String {
        let decoded = Tss2_RC_Decode(code).map { String(cString: $0) } ?? "unknown"
        return "cannot \(operation): TPM error 0x\(String(code, radix: 16)) (\(decoded))"
    }
}
