import Foundation
import SecureCrypto

/// Why an authentication did not succeed, with a code whose raw value is the matching `LAError.Code` raw value.
///
/// The public `LAError` type lives in the LocalAuthentication module; this struct carries the same numbers so the
/// engine can translate one into the other without a table. The message never contains a passcode, a template or
/// any other secret.
package struct AuthenticationError: CodedError, CustomStringConvertible, Sendable, Equatable {
    /// What went wrong, as Apple's `LAError.Code` raw value; new codes can be added without breaking callers.
    package typealias Code = ErrorCode<AuthenticationError>

    /// The code's name, e.g. `authenticationFailed`.
    package static func name(of code: Code) -> String? {
        switch code {
        case .authenticationFailed: "authenticationFailed"
        case .userCancel: "userCancel"
        case .userFallback: "userFallback"
        case .systemCancel: "systemCancel"
        case .passcodeNotSet: "passcodeNotSet"
        case .biometryNotAvailable: "biometryNotAvailable"
        case .biometryNotEnrolled: "biometryNotEnrolled"
        case .biometryLockout: "biometryLockout"
        case .appCancel: "appCancel"
        case .invalidContext: "invalidContext"
        case .biometryDisconnected: "biometryDisconnected"
        case .notInteractive: "notInteractive"
        default: nil
        }
    }

    /// The status a C library reported, kept for diagnostics and for tests that pin a mapping.
    package struct BackendStatus: Hashable, Sendable, CustomStringConvertible {
        /// Which library: `"pam"`, `"libfprint"`, `"gio"`, or `"system"` (errno).
        package var library: String
        /// The library's own code: a PAM return value, an `FpDeviceError`/`FpDeviceRetry` value, a `GIOErrorEnum`
        /// value, or an errno.
        package var code: Int

        /// A status from `library`.
        package init(library: String, code: Int) {
            self.library = library
            self.code = code
        }

        /// `library code`, e.g. `pam 7`.
        package var description: String { "\(library) \(code)" }
    }

    /// The LAError-compatible code.
    package var code: Code
    /// A human-readable explanation without secrets.
    package var message: String
    /// For a refused attempt under the attempt policy: how long until the next attempt is allowed.
    package var retryAfter: Duration?
    /// The underlying library status, when there is one.
    package var backendStatus: BackendStatus?

    /// An error with `code` and a secret-free `message`.
    package init(_ code: Code, _ message: String, retryAfter: Duration? = nil, backendStatus: BackendStatus? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.backendStatus = backendStatus
    }

    /// The code, its raw value, the message and the backend status.
    package var description: String {
        var text = "\(code) (\(code.rawValue)): \(message)"
        if let backendStatus { text += " [\(backendStatus)]" }
        return text
    }
}

extension AuthenticationError.BackendStatus: ProtocolCodable {
    /// A record: 1 library, 2 code.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, library)
        writer.field(2, code)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(library: try reader.field(1), code: try reader.field(2))
    }
}

extension AuthenticationError: ProtocolCodable {
    /// A record: 1 code (the `LAError` raw value), 2 message, then the optional 3 retryAfter, 4 backendStatus.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, code)
        writer.field(2, message)
        writer.optionalField(3, retryAfter)
        writer.optionalField(4, backendStatus)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            try reader.field(1), try reader.field(2), retryAfter: try reader.optionalField(3),
            backendStatus: try reader.optionalField(4))
    }
}

extension ErrorCode where Failure == AuthenticationError {
    /// The credential was presented but did not match (`LAError.authenticationFailed`, -1).
    package static var authenticationFailed: Self { Self(rawValue: -1) }
    /// The user cancelled, e.g. answered no passcode or pressed Ctrl-C (`LAError.userCancel`, -2).
    package static var userCancel: Self { Self(rawValue: -2) }
    /// The user asked for the fallback method (`LAError.userFallback`, -3).
    package static var userFallback: Self { Self(rawValue: -3) }
    /// The system ended the attempt, e.g. no finger within the attempt timeout (`LAError.systemCancel`, -4).
    package static var systemCancel: Self { Self(rawValue: -4) }
    /// No usable passcode: the PAM service or the account cannot authenticate (`LAError.passcodeNotSet`, -5).
    package static var passcodeNotSet: Self { Self(rawValue: -5) }
    /// No usable fingerprint reader, or the reader is busy or failed (`LAError.biometryNotAvailable`, -6).
    package static var biometryNotAvailable: Self { Self(rawValue: -6) }
    /// The user has no enrolled fingerprint for this reader (`LAError.biometryNotEnrolled`, -7).
    package static var biometryNotEnrolled: Self { Self(rawValue: -7) }
    /// Too many failed fingerprint attempts; a passcode success unlocks (`LAError.biometryLockout`, -8).
    package static var biometryLockout: Self { Self(rawValue: -8) }
    /// The calling program cancelled, e.g. its task was cancelled (`LAError.appCancel`, -9).
    package static var appCancel: Self { Self(rawValue: -9) }
    /// The context is no longer usable (`LAError.invalidContext`, -10).
    package static var invalidContext: Self { Self(rawValue: -10) }
    /// The reader was unplugged or vanished during the operation (`LAError.biometryDisconnected`, -13).
    package static var biometryDisconnected: Self { Self(rawValue: -13) }
    /// Interaction was needed but not allowed (`LAError.notInteractive`, -1004).
    package static var notInteractive: Self { Self(rawValue: -1004) }
}
