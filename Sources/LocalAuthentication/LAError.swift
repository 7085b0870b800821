import Foundation
import SecurityProtocol

/// Where a method that reports failure through its return value stores the error (`canEvaluatePolicy`).
///
/// Differs from Apple only in spelling: Linux Foundation has no `AutoreleasingUnsafeMutablePointer`, so this is an
/// `UnsafeMutablePointer`; `var error: NSError?` passed as `&error` works the same.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

/// The domain of LocalAuthentication errors, `"com.apple.LocalAuthentication"` (`kLAErrorDomain`).
public let LAErrorDomain: String = "com.apple.LocalAuthentication"

/// An error from LocalAuthentication: a code with Apple's raw values, in Apple's domain.
///
/// As on Apple platforms, `LAError` is a struct (so codes can be added without breaking callers) that bridges to
/// `NSError` (`CustomNSError`), and `LAError.Code` is an `Int` enum whose old and new spellings of the same value are
/// a case and a static alias, so `switch` statements written for Apple platforms compile unchanged.
public struct LAError: CustomNSError, Hashable, Sendable {
    /// The reasons an authentication fails, with `LAError.h`'s raw values.
    public enum Code: Int, Sendable, Hashable {
        /// The user gave credentials that did not match (-1).
        case authenticationFailed = -1
        /// The user cancelled (-2).
        case userCancel = -2
        /// The user chose the fallback ("Enter Password") (-3).
        case userFallback = -3
        /// The system ended the authentication, e.g. no finger before the attempt timed out (-4).
        case systemCancel = -4
        /// No passcode is set: the PAM service cannot authenticate the user (-5).
        case passcodeNotSet = -5
        /// No usable fingerprint reader (-6); deprecated spelling of ``biometryNotAvailable``.
        case touchIDNotAvailable = -6
        /// No fingerprint is enrolled (-7); deprecated spelling of ``biometryNotEnrolled``.
        case touchIDNotEnrolled = -7
        /// Too many failed fingerprint attempts (-8); deprecated spelling of ``biometryLockout``.
        case touchIDLockout = -8
        /// The app cancelled: `invalidate()` during the evaluation, or its task was cancelled (-9).
        case appCancel = -9
        /// The context was invalidated before this call (-10).
        case invalidContext = -10
        /// No companion device (-11); never available on Linux.
        case companionNotAvailable = -11
        /// No paired biometric accessory (-12); not reported on Linux.
        case biometryNotPaired = -12
        /// The fingerprint reader was unplugged during the operation (-13).
        case biometryDisconnected = -13
        /// Embedded UI dimensions were invalid (-14); not reported on Linux.
        case invalidDimensions = -14
        /// An authentication was needed but `interactionNotAllowed` is set or nobody can draw the prompt (-1004).
        case notInteractive = -1004

        /// No usable fingerprint reader (-6).
        public static var biometryNotAvailable: LAError.Code { .touchIDNotAvailable }
        /// No fingerprint is enrolled (-7).
        public static var biometryNotEnrolled: LAError.Code { .touchIDNotEnrolled }
        /// Too many failed fingerprint attempts; the passcode unlocks (-8).
        public static var biometryLockout: LAError.Code { .touchIDLockout }
        /// No paired watch (-11); Apple's deprecated spelling of ``companionNotAvailable``.
        public static var watchNotAvailable: LAError.Code { .companionNotAvailable }

        /// Matches an error against a code: `catch LAError.userCancel` or `case LAError.Code.userCancel`.
        public static func ~= (code: LAError.Code, error: any Error) -> Bool {
            if let error = error as? LAError { return error.code == code }
            let error = error as NSError
            return error.domain == LAErrorDomain && error.code == code.rawValue
        }
    }

    /// The error's code.
    public let code: Code
    private let message: String?

    /// An error with `code` and, optionally, `userInfo` (its `NSLocalizedDescriptionKey` string is kept).
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        self.message = userInfo[NSLocalizedDescriptionKey] as? String
    }

    /// The error bridged from an `NSError` in ``LAErrorDomain``; any other error becomes `authenticationFailed`.
    public init(_nsError error: NSError) {
        self.init(
            error.domain == LAErrorDomain ? Code(rawValue: error.code) ?? .authenticationFailed : .authenticationFailed,
            userInfo: error.userInfo)
    }

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The same error as one from the authenticators (same raw values).
    init(_ error: AuthenticationError) {
        self.init(Code(rawValue: error.code.rawValue) ?? .authenticationFailed, error.message)
    }

    /// Converts any error the engine reports into an `LAError`.
    static func from(_ error: any Error) -> LAError {
        switch error {
        case let error as LAError: error
        case let error as AuthenticationError: LAError(error)
        default: LAError(.invalidContext, "the authentication service failed: \(error)")
        }
    }

    /// ``LAErrorDomain``.
    public static var errorDomain: String { LAErrorDomain }
    /// The code's raw value.
    public var errorCode: Int { code.rawValue }
    /// `NSLocalizedDescriptionKey`: what went wrong, never a secret.
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: localizedDescription] }
    /// What went wrong.
    public var localizedDescription: String { message ?? "Authentication failed (\(code))." }

    /// Whether two errors have the same code.
    public static func == (lhs: LAError, rhs: LAError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `.authenticationFailed`
    public static var authenticationFailed: Code { .authenticationFailed }
    /// `.userCancel`
    public static var userCancel: Code { .userCancel }
    /// `.userFallback`
    public static var userFallback: Code { .userFallback }
    /// `.systemCancel`
    public static var systemCancel: Code { .systemCancel }
    /// `.passcodeNotSet`
    public static var passcodeNotSet: Code { .passcodeNotSet }
    /// `.touchIDNotAvailable` (deprecated spelling of ``biometryNotAvailable``)
    public static var touchIDNotAvailable: Code { .touchIDNotAvailable }
    /// `.touchIDNotEnrolled` (deprecated spelling of ``biometryNotEnrolled``)
    public static var touchIDNotEnrolled: Code { .touchIDNotEnrolled }
    /// `.touchIDLockout` (deprecated spelling of ``biometryLockout``)
    public static var touchIDLockout: Code { .touchIDLockout }
    /// `.appCancel`
    public static var appCancel: Code { .appCancel }
    /// `.invalidContext`
    public static var invalidContext: Code { .invalidContext }
    /// `.biometryNotAvailable`
    public static var biometryNotAvailable: Code { .touchIDNotAvailable }
    /// `.biometryNotEnrolled`
    public static var biometryNotEnrolled: Code { .touchIDNotEnrolled }
    /// `.biometryLockout`
    public static var biometryLockout: Code { .touchIDLockout }
    /// `.companionNotAvailable`
    public static var companionNotAvailable: Code { .companionNotAvailable }
    /// `.watchNotAvailable` (deprecated spelling of ``companionNotAvailable``)
    public static var watchNotAvailable: Code { .companionNotAvailable }
    /// `.biometryNotPaired`
    public static var biometryNotPaired: Code { .biometryNotPaired }
    /// `.biometryDisconnected`
    public static var biometryDisconnected: Code { .biometryDisconnected }
    /// `.invalidDimensions`
    public static var invalidDimensions: Code { .invalidDimensions }
    /// `.notInteractive`
    public static var notInteractive: Code { .notInteractive }
}
