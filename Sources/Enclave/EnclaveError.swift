/// A failure of the key store: a code to match on and a message that never contains key material.
package struct EnclaveError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, matchable with `~=`.
    package struct Code: RawRepresentable, Hashable, Sendable {
        package var rawValue: Int
        package init(rawValue: Int) { self.rawValue = rawValue }

        /// The class key is not in memory: the keychain is locked (or not unlocked since boot).
        package static let locked = Code(rawValue: 1)
        /// The class needs a passcode and none is set.
        package static let passcodeNotSet = Code(rawValue: 2)
        /// A wrapped key does not open: the key files were changed or belong to another store.
        package static let corrupt = Code(rawValue: 3)
        /// A key file could not be read or written.
        package static let io = Code(rawValue: 4)
        /// The key is bound to an application password and the one given does not open it (or none was given).
        package static let wrongPassword = Code(rawValue: 5)
        /// The configuration names no usable backend, or the store needs one that is not configured or answers.
        package static let configuration = Code(rawValue: 6)
        /// Key attestation is asked of a key or store that no TPM holds.
        package static let notAttestable = Code(rawValue: 7)
        /// A key-attestation challenge does not open in this TPM (made for another TPM or attestation key, or
        /// changed).
        package static let invalidChallenge = Code(rawValue: 8)
        /// The TPM refuses passcode guesses for now (dictionary-attack lockout).
        package static let lockedOut = Code(rawValue: 9)

        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? EnclaveError)?.code == code
        }
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "EnclaveError(\(code.rawValue)): \(message)" }
}
