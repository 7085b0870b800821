/// Why a fingerprint scan must be repeated (libfprint's `FpDeviceRetry`); a retry is never a failed attempt.
package struct ScanRetryReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `FpDeviceRetry` value.
    package var rawValue: Int
    /// A reason with this `FpDeviceRetry` value.
    package init(rawValue: Int) { self.rawValue = rawValue }

    /// "Please try again."
    package static let general = ScanRetryReason(rawValue: 0)
    /// The swipe was too short.
    package static let tooShort = ScanRetryReason(rawValue: 1)
    /// The finger was not centred on the reader.
    package static let centerFinger = ScanRetryReason(rawValue: 2)
    /// Lift the finger, then try again.
    package static let removeFinger = ScanRetryReason(rawValue: 3)

    /// Advice for the user.
    package var description: String {
        switch self {
        case .general: "try again"
        case .tooShort: "swipe too short, try again"
        case .centerFinger: "finger not centred, try again"
        case .removeFinger: "remove the finger, then try again"
        default: "retry (\(rawValue))"
        }
    }
}

/// The `FpDeviceRetry` value, eight bytes.
extension ScanRetryReason: ProtocolCodable {}
