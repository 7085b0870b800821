import Foundation

/// How a credential was obtained.
package enum AuthenticationMethod: Sendable, Hashable {
    /// A fingerprint matched an enrolled print.
    case biometry
    /// The user's passcode passed the PAM stack.
    case passcode
}

/// What a successful evaluation leaves in its context: {method, time, enrolled-set hash, user}.
package struct Credential: Sendable, Equatable {
    /// How the user authenticated.
    package var method: AuthenticationMethod
    /// When (the configuration's clock).
    package var time: Date
    /// The enrolled-set state hash at that time (nil when nothing was enrolled).
    package var enrolledSetHash: Data?
    /// Who authenticated.
    package var user: String
    /// Whether it came from the reuse window (`touchIDAuthenticationAllowableReuseDuration`) rather than a scan in
    /// this evaluation: it answers `evaluatePolicy`, and never satisfies a keychain item's or key's access control.
    package var isReused: Bool

    /// A credential with these facts.
    package init(method: AuthenticationMethod, time: Date, enrolledSetHash: Data?, user: String, isReused: Bool = false)
    {
        self.method = method
        self.time = time
        self.enrolledSetHash = enrolledSetHash
        self.user = user
        self.isReused = isReused
    }
}

extension AuthenticationMethod: ProtocolCodable {
    /// One byte: 1 biometry, 2 passcode.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .biometry: writer.byte(1)
        case .passcode: writer.byte(2)
        }
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        switch try reader.remainingByte(for: "an authentication method") {
        case 1: self = .biometry
        case 2: self = .passcode
        default: throw MessageDecodingError(.invalidValue, at: start, "unknown authentication method")
        }
    }
}

extension Credential: ProtocolCodable {
    /// A record: 1 method, 2 time, 3 enrolledSetHash (absent when nil), 4 user, 5 isReused.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, method)
        writer.field(2, time)
        writer.optionalField(3, enrolledSetHash)
        writer.field(4, user)
        writer.field(5, isReused)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            method: try reader.field(1), time: try reader.field(2), enrolledSetHash: try reader.optionalField(3),
            user: try reader.field(4), isReused: try reader.field(5))
    }
}
