import Foundation

/// What `canEvaluatePolicy` learns.
package struct PolicyAvailability: Sendable, Equatable {
    /// Whether a usable fingerprint reader is present (`LABiometryType.touchID`).
    package var readerPresent: Bool
    /// Why the policy cannot be evaluated, or nil when it can.
    package var error: AuthenticationError?
    /// The enrolled-set state hash, when the policy is biometric and can be evaluated.
    package var domainState: Data?

    /// An availability with these facts.
    package init(readerPresent: Bool, error: AuthenticationError? = nil, domainState: Data? = nil) {
        self.readerPresent = readerPresent
        self.error = error
        self.domainState = domainState
    }
}

extension PolicyAvailability: ProtocolCodable {
    /// A record: 1 readerPresent, then the optional 2 error, 3 domainState.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, readerPresent)
        writer.optionalField(2, error)
        writer.optionalField(3, domainState)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            readerPresent: try reader.field(1), error: try reader.optionalField(2),
            domainState: try reader.optionalField(3))
    }
}
