/// A policy an evaluation can be asked for; raw values are `LAPolicy`'s.
package enum EvaluationPolicy: Int, Sendable, Hashable {
    /// A fingerprint, nothing else (`.deviceOwnerAuthenticationWithBiometrics`).
    case biometrics = 1
    /// A fingerprint, falling back to the passcode (`.deviceOwnerAuthentication`).
    case deviceOwner = 2
    /// A companion device; no Linux part serves it.
    case companion = 3
    /// A fingerprint or a companion device; served by the fingerprint.
    case biometricsOrCompanion = 4
    /// Wrist detection (watchOS only); no Linux part serves it.
    case wristDetection = 5
    /// The passcode, nothing else: what a `devicePasscode` access-control list asks for (no `LAPolicy` has it).
    case passcode = 1000
}

/// The raw value (`LAPolicy`'s), eight bytes.
extension EvaluationPolicy: ProtocolCodable {}
