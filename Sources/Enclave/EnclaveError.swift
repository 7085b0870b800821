import SecureCrypto

/// A failure of the key store: a code to match on and a message that never contains key material.
package struct EnclaveError: CodedError, CustomStringConvertible, Sendable {
    /// What went wrong, matchable with `~=`.
    package typealias Code = ErrorCode<EnclaveError>

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

extension ErrorCode where Failure == EnclaveError {
    /// The class key is not in memory: the keychain is locked (or not unlocked since boot).
    package static var locked: Self { Self(rawValue: 1) }
    /// The class needs a passcode and none is set.
    package static var passcodeNotSet: Self { Self(rawValue: 2) }
    /// A wrapped key does not open: the key files were changed or belong to another store.
    package static var corrupt: Self { Self(rawValue: 3) }
    /// A key file could not be read or written.
    package static var io: Self { Self(rawValue: 4) }
    /// The key is bound to an application password and the one given does not open it (or none was given).
    package static var wrongPassword: Self { Self(rawValue: 5) }
    /// The configuration names no usable backend, or the store needs one that is not configured or answers.
    package static var configuration: Self { Self(rawValue: 6) }
    /// Key attestation is asked of a key or store that no TPM holds.
    package static var notAttestable: Self { Self(rawValue: 7) }
    /// A key-attestation challenge does not open in this TPM (made for another TPM or attestation key, or
    /// changed).
    package static var invalidChallenge: Self { Self(rawValue: 8) }
    /// The TPM refuses passcode guesses for now (dictionary-attack lockout).
    package static var lockedOut: Self { Self(rawValue: 9) }
}
