/// An engine failure carrying the `OSStatus` Keychain Services reports for it, and a message that never contains
/// item contents or key material.
package struct KeychainStatus: Error, CustomStringConvertible, Sendable, Equatable {
    /// An `OSStatus` value, matchable with `~=`.
    package struct Code: RawRepresentable, Hashable, Sendable {
        package var rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }

        package static let param = Code(rawValue: -50)
        package static let allocate = Code(rawValue: -108)
        package static let io = Code(rawValue: -36)
        package static let diskFull = Code(rawValue: -34)
        package static let notAvailable = Code(rawValue: -25291)
        package static let readOnly = Code(rawValue: -25292)
        package static let authFailed = Code(rawValue: -25293)
        package static let duplicateItem = Code(rawValue: -25299)
        package static let itemNotFound = Code(rawValue: -25300)
        package static let noSuchAttribute = Code(rawValue: -25303)
        package static let noSuchClass = Code(rawValue: -25306)
        package static let interactionNotAllowed = Code(rawValue: -25308)
        package static let decode = Code(rawValue: -26275)
        package static let missingEntitlement = Code(rawValue: -34018)
        package static let internalComponent = Code(rawValue: -2070)
        package static let unimplemented = Code(rawValue: -4)

        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? KeychainStatus)?.code == code
        }
    }

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
    package static let userCanceled = KeychainStatus.Code(rawValue: -128)

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

extension KeychainStatus.Code: ProtocolCodable {}

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
