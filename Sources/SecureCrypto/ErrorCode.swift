/// What went wrong, as the error types of the package say it: a stable number, matchable with `~=` against any
/// thrown error (`catch EnclaveError.Code.locked`, `case CryptoError.Code.invalidScalar`). Each error type names
/// its codes in an extension (`extension ErrorCode where Failure == EnclaveError`); new codes can be added without
/// breaking callers.
package struct ErrorCode<Failure: CodedError>: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The number.
    package var rawValue: Failure.RawCode
    /// A code with this number.
    package init(rawValue: Failure.RawCode) { self.rawValue = rawValue }

    /// The code's name where its error type gives one, else its number.
    package var description: String { Failure.name(of: self) ?? "code \(rawValue)" }

    /// Matches a thrown error against a code.
    package static func ~= (code: Self, error: any Error) -> Bool {
        (error as? Failure)?.code == code
    }
}

/// An error whose failures carry an ``ErrorCode``.
package protocol CodedError: Error {
    /// The type of the codes' numbers: `Int`, or `Int32` for an `OSStatus`.
    associatedtype RawCode: BinaryInteger & Hashable & Sendable = Int
    /// What went wrong.
    var code: ErrorCode<Self> { get }
    /// What went wrong, in words that never hold a secret.
    var message: String { get }
    /// The name of `code` (for messages), where the type names its codes; nil prints the number.
    static func name(of code: ErrorCode<Self>) -> String?
}

extension CodedError {
    /// No names: codes print as numbers.
    package static func name(of code: ErrorCode<Self>) -> String? { nil }

    /// The type, the code's number and the message: `EnclaveError(1): the keychain is locked`.
    package var description: String { "\(Self.self)(\(code.rawValue)): \(message)" }
}
