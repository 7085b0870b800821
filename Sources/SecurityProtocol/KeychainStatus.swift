import SecureCrypto

/// An engine failure carrying the `OSStatus` Keychain Services reports for it, and a message that never contains
/// item contents or key material.
package struct KeychainStatus: CodedError, CustomStringConvertible, Sendable, Equatable {
    /// An `OSStatus` value, matchable with `~=`.
    package typealias Code = ErrorCode<KeychainStatus>
    package typealias RawCode = Int32

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "OSStatus \(code.rawValue): \(message)" }
}

extension KeychainStatus.Code {
    /// `errSecUserCanceled`: the user cancelled the authentication an item's access control asked for.
    package static var userCanceled: Self { Self(rawValue: -128) }

    /// The `OSStatus` Security.framework reports for an `LAError` code (`osstatus_for_localauthentication_error`):
    /// userCancel → `errSecUserCanceled`, notInteractive → `errSecInteractionNotAllowed`, anything else →
    /// `errSecAuthFailed`.
    package init(authenticationCode code: AuthenticationError.Code) {
        switch code {
        case .userCancel: self = .userCanceled
        case .notInteractive: self = .interactionNotAllowed
        default: self = .authFailed
        }
    }
}

extension KeychainStatus {
    /// The status Security.framework reports for a failed authentication (see `init(authenticationCode:)`);
    /// a `KeychainStatus` passes through, anything else is `errSecInternalComponent`.
    package init(authenticationFailure error: any Error) {
        switch error {
        case let status as KeychainStatus: self = status
        case let failure as AuthenticationError:
            self.init(KeychainStatus.Code(authenticationCode: failure.code), failure.message)
        default: self.init(.internalComponent, "internal failure")
        }
    }
}

extension ErrorCode: ProtocolCodable where RawValue: ProtocolCodable {}

extension KeychainStatus: ProtocolCodable {
    /// A record: 1 code (the `OSStatus`, four bytes), 2 message.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, code)
        writer.field(2, message)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(try reader.field(1), try reader.field(2))
    }
}

extension ErrorCode where Failure == KeychainStatus {
    package static var param: Self { Self(rawValue: -50) }
    package static var allocate: Self { Self(rawValue: -108) }
    package static var io: Self { Self(rawValue: -36) }
    package static var diskFull: Self { Self(rawValue: -34) }
    package static var notAvailable: Self { Self(rawValue: -25291) }
    package static var readOnly: Self { Self(rawValue: -25292) }
    package static var authFailed: Self { Self(rawValue: -25293) }
    package static var duplicateItem: Self { Self(rawValue: -25299) }
    package static var itemNotFound: Self { Self(rawValue: -25300) }
    package static var noSuchAttribute: Self { Self(rawValue: -25303) }
    package static var noSuchClass: Self { Self(rawValue: -25306) }
    package static var interactionNotAllowed: Self { Self(rawValue: -25308) }
    package static var decode: Self { Self(rawValue: -26275) }
    package static var missingEntitlement: Self { Self(rawValue: -34018) }
    package static var internalComponent: Self { Self(rawValue: -2070) }
    package static var unimplemented: Self { Self(rawValue: -4) }
}
