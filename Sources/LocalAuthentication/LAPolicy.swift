import Foundation

/// What an evaluation asks of the user (`LAPolicy`, raw values from `LAPublicDefines.h`).
///
/// On Linux a fingerprint means a libfprint reader and the passcode means the user's PAM stack. Companion, watch
/// and wrist-detection policies exist so Apple code compiles; no Linux part serves them, so they report
/// `LAError.Code.companionNotAvailable` and never crash. `.deviceOwnerAuthenticationWithBiometricsOrCompanion` is
/// served by the fingerprint alone.
public enum LAPolicy: Int, Sendable, Hashable {
    /// A fingerprint (1). Locked after 5 failures until a passcode success.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// A fingerprint, falling back to the passcode (2).
    case deviceOwnerAuthentication = 2
    /// A companion device (3); not available on Linux.
    case deviceOwnerAuthenticationWithCompanion = 3
    /// A fingerprint or a companion device (4); on Linux, the fingerprint.
    case deviceOwnerAuthenticationWithBiometricsOrCompanion = 4
    /// Wrist detection (5, watchOS); not available on Linux.
    case deviceOwnerAuthenticationWithWristDetection = 5

    /// A paired watch (3); Apple's older spelling of ``deviceOwnerAuthenticationWithCompanion``.
    public static var deviceOwnerAuthenticationWithWatch: LAPolicy { .deviceOwnerAuthenticationWithCompanion }
    /// A fingerprint or a paired watch (4); Apple's older spelling of
    /// ``deviceOwnerAuthenticationWithBiometricsOrCompanion``.
    public static var deviceOwnerAuthenticationWithBiometricsOrWatch: LAPolicy {
        .deviceOwnerAuthenticationWithBiometricsOrCompanion
    }
}

/// The kind of biometry a device has (`LABiometryType`).
///
/// A libfprint fingerprint reader reports ``touchID``, Apple's fingerprint type.
public enum LABiometryType: Int, Sendable, Hashable {
    /// No biometry (0).
    case none = 0
    /// A fingerprint reader (1).
    case touchID = 1
    /// Face recognition (2); never reported on Linux.
    case faceID = 2
    /// Iris recognition (4); never reported on Linux.
    case opticID = 4

    /// No biometry; Apple's deprecated spelling of ``none``.
    public static var LABiometryNone: LABiometryType { .none }
}

/// A credential an app can give a context (`LACredentialType`).
public enum LACredentialType: Int, Sendable, Hashable {
    /// An application password (0): part of the key of `.applicationPassword` keychain items.
    case applicationPassword = 0
    /// A smart-card PIN (-3); not supported on Linux (`setCredential` returns false).
    case smartCardPIN = -3
}

/// What an access-control list is evaluated for (`LAAccessControlOperation`).
public enum LAAccessControlOperation: Int, Sendable, Hashable {
    /// Creating a keychain item (0).
    case createItem = 0
    /// Using a keychain item (1).
    case useItem = 1
    /// Creating a key (2).
    case createKey = 2
    /// Signing with a private key (3).
    case useKeySign = 3
    /// Decrypting with a private key (4).
    case useKeyDecrypt = 4
    /// Key exchange with a private key (5).
    case useKeyKeyExchange = 5
}

/// A kind of companion device (`LACompanionType`); none is available on Linux.
public enum LACompanionType: Int, Sendable, Hashable {
    /// A paired Apple Watch (1).
    case watch = 1
    /// A paired Mac (2).
    case mac = 2
    /// A paired Vision Pro (4).
    case vision = 4
}

/// The longest ``LAContext/touchIDAuthenticationAllowableReuseDuration`` honoured: 300 seconds (5 minutes).
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300
