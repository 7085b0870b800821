import KeychainServices
import SecurityProtocol

/// A failed keychain operation in the typed Swift API, carrying the same `OSStatus` the SecItem functions return.
public struct KeychainError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An `OSStatus` code, matchable with `~=` against an error.
    public struct Code: RawRepresentable, Hashable, Sendable {
        /// The `OSStatus` value.
        public var rawValue: OSStatus

        /// Wraps an `OSStatus`.
        public init(rawValue: OSStatus) { self.rawValue = rawValue }

        /// `errSecParam`: the request was malformed.
        public static let param = Code(rawValue: errSecParam)
        /// `errSecDuplicateItem`: an item with the same primary key exists.
        public static let duplicateItem = Code(rawValue: errSecDuplicateItem)
        /// `errSecItemNotFound`.
        public static let itemNotFound = Code(rawValue: errSecItemNotFound)
        /// `errSecInteractionNotAllowed`: locked, or an authentication would be needed.
        public static let interactionNotAllowed = Code(rawValue: errSecInteractionNotAllowed)
        /// `errSecAuthFailed`: wrong backup password, or no passcode for a passcode-only item.
        public static let authFailed = Code(rawValue: errSecAuthFailed)
        /// `errSecMissingEntitlement`: the access group is not the caller's.
        public static let missingEntitlement = Code(rawValue: errSecMissingEntitlement)
        /// `errSecDecode`: stored data is damaged or was tampered with.
        public static let decode = Code(rawValue: errSecDecode)
        /// `errSecIO`.
        public static let io = Code(rawValue: errSecIO)

        /// Whether `error` is a `KeychainError` with this code.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? KeychainError)?.code == code
        }
    }

    /// What went wrong.
    public var code: Code
    /// The engine's own words, when it gave some (which file is damaged, say); not part of equality.
    package var detail: String?

    /// Creates an error for `status`.
    public init(status: OSStatus) {
        code = Code(rawValue: status)
    }

    /// Two errors are equal when their statuses are (the messages may differ).
    public static func == (lhs: KeychainError, rhs: KeychainError) -> Bool { lhs.code == rhs.code }

    /// Hashes the status, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The `OSStatus`.
    public var status: OSStatus { code.rawValue }

    /// Apple's message for the status and its number.
    public var description: String {
        "\(SecCopyErrorMessageString(status, nil) ?? "Unknown error") (OSStatus \(status))"
    }

    init(_ status: KeychainStatus) {
        self.init(status: status.code.rawValue)
        detail = status.message.isEmpty ? nil : status.message
    }
}
