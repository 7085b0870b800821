// The numeric constants of Apple's LAPublicDefines.h (`kLA…` macros), as Swift imports them: `Int32` values, and
// the error domain as a `String`. Code that compares `error.code` against `kLAErrorUserCancel` or builds a policy
// from `kLAPolicyDeviceOwnerAuthentication` compiles unchanged.

/// `LAPolicy.deviceOwnerAuthenticationWithBiometrics` (1).
public let kLAPolicyDeviceOwnerAuthenticationWithBiometrics: Int32 = 1
/// `LAPolicy.deviceOwnerAuthentication` (2).
public let kLAPolicyDeviceOwnerAuthentication: Int32 = 2
/// `LAPolicy.deviceOwnerAuthenticationWithWatch` (3).
public let kLAPolicyDeviceOwnerAuthenticationWithWatch: Int32 = 3
/// `LAPolicy.deviceOwnerAuthenticationWithCompanion` (3, the same as with a watch).
public let kLAPolicyDeviceOwnerAuthenticationWithCompanion: Int32 = 3
/// `LAPolicy.deviceOwnerAuthenticationWithBiometricsOrWatch` (4).
public let kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrWatch: Int32 = 4
/// `LAPolicy.deviceOwnerAuthenticationWithBiometricsOrCompanion` (4).
public let kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrCompanion: Int32 = 4
/// `LAPolicy.deviceOwnerAuthenticationWithWristDetection` (5).
public let kLAPolicyDeviceOwnerAuthenticationWithWristDetection: Int32 = 5

/// `LACredentialType.applicationPassword` (0).
public let kLACredentialTypeApplicationPassword: Int32 = 0
/// `LACredentialType.smartCardPIN` (-3).
public let kLACredentialSmartCardPIN: Int32 = -3

/// `LABiometryType.none` (0).
public let kLABiometryTypeNone: Int32 = 0
/// `LABiometryType.touchID` (1 << 0).
public let kLABiometryTypeTouchID: Int32 = 1 << 0
/// `LABiometryType.faceID` (1 << 1).
public let kLABiometryTypeFaceID: Int32 = 1 << 1
/// `LABiometryType.opticID` (1 << 2).
public let kLABiometryTypeOpticID: Int32 = 1 << 2

/// `LAError.authenticationFailed` (-1).
public let kLAErrorAuthenticationFailed: Int32 = -1
/// `LAError.userCancel` (-2).
public let kLAErrorUserCancel: Int32 = -2
/// `LAError.userFallback` (-3).
public let kLAErrorUserFallback: Int32 = -3
/// `LAError.systemCancel` (-4).
public let kLAErrorSystemCancel: Int32 = -4
/// `LAError.passcodeNotSet` (-5).
public let kLAErrorPasscodeNotSet: Int32 = -5
/// `LAError.biometryNotAvailable` (-6).
public let kLAErrorBiometryNotAvailable: Int32 = -6
/// `LAError.touchIDNotAvailable` (-6, the older name).
public let kLAErrorTouchIDNotAvailable: Int32 = -6
/// `LAError.biometryNotEnrolled` (-7).
public let kLAErrorBiometryNotEnrolled: Int32 = -7
/// `LAError.touchIDNotEnrolled` (-7, the older name).
public let kLAErrorTouchIDNotEnrolled: Int32 = -7
/// `LAError.biometryLockout` (-8).
public let kLAErrorBiometryLockout: Int32 = -8
/// `LAError.touchIDLockout` (-8, the older name).
public let kLAErrorTouchIDLockout: Int32 = -8
/// `LAError.appCancel` (-9).
public let kLAErrorAppCancel: Int32 = -9
/// `LAError.invalidContext` (-10).
public let kLAErrorInvalidContext: Int32 = -10
/// `LAError.companionNotAvailable` (-11).
public let kLAErrorCompanionNotAvailable: Int32 = -11
/// `LAError.watchNotAvailable` (-11, the older name).
public let kLAErrorWatchNotAvailable: Int32 = -11
/// `LAError.biometryNotPaired` (-12).
public let kLAErrorBiometryNotPaired: Int32 = -12
/// `LAError.biometryDisconnected` (-13).
public let kLAErrorBiometryDisconnected: Int32 = -13
/// `LAError.invalidDimensions` (-14).
public let kLAErrorInvalidDimensions: Int32 = -14
/// `LAError.notInteractive` (-1004).
public let kLAErrorNotInteractive: Int32 = -1004

/// The LocalAuthentication error domain, `"com.apple.LocalAuthentication"` (`kLAErrorDomain`).
public let kLAErrorDomain = "com.apple.LocalAuthentication"
