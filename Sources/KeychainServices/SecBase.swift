import Foundation

// The OSStatus codes of Security/SecBase.h, with Apple's values.

/// No error.
public let errSecSuccess: OSStatus = 0
/// Function or operation not implemented.
public let errSecUnimplemented: OSStatus = -4
/// The disk is full.
public let errSecDiskFull: OSStatus = -34
/// The disk is full (deprecated spelling).
public let errSecDskFull: OSStatus = -34
/// I/O error.
public let errSecIO: OSStatus = -36
/// One or more parameters passed to a function were not valid.
public let errSecParam: OSStatus = -50
/// Failed to allocate memory.
public let errSecAllocate: OSStatus = -108
/// User canceled the operation.
public let errSecUserCanceled: OSStatus = -128
/// Bad parameter or invalid state for operation.
public let errSecBadReq: OSStatus = -909
/// An internal component failed.
public let errSecInternalComponent: OSStatus = -2070
/// An unknown Core Foundation error occurred.
public let errSecCoreFoundationUnknown: OSStatus = -4960
/// A required entitlement isn't present.
public let errSecMissingEntitlement: OSStatus = -34018
/// Client is restricted and is not permitted to perform this operation.
public let errSecRestrictedAPI: OSStatus = -34020
/// No keychain is available.
public let errSecNotAvailable: OSStatus = -25291
/// This keychain cannot be modified.
public let errSecReadOnly: OSStatus = -25292
/// The user name or passphrase you entered is not correct.
public let errSecAuthFailed: OSStatus = -25293
/// The specified keychain could not be found.
public let errSecNoSuchKeychain: OSStatus = -25294
/// The specified keychain is not a valid keychain file.
public let errSecInvalidKeychain: OSStatus = -25295
/// A keychain with the same name already exists.
public let errSecDuplicateKeychain: OSStatus = -25296
/// The specified callback function is already installed.
public let errSecDuplicateCallback: OSStatus = -25297
/// The specified callback function is not valid.
public let errSecInvalidCallback: OSStatus = -25298
/// The specified item already exists in the keychain.
public let errSecDuplicateItem: OSStatus = -25299
/// The specified item could not be found in the keychain.
public let errSecItemNotFound: OSStatus = -25300
/// There is not enough memory available to use the specified item.
public let errSecBufferTooSmall: OSStatus = -25301
/// This item contains information which is too large or in a format that cannot be displayed.
public let errSecDataTooLarge: OSStatus = -25302
/// The specified attribute does not exist.
public let errSecNoSuchAttr: OSStatus = -25303
/// The specified item is no longer valid.
public let errSecInvalidItemRef: OSStatus = -25304
/// Unable to search the current keychain.
public let errSecInvalidSearchRef: OSStatus = -25305
/// The specified item does not appear to be a valid keychain item.
public let errSecNoSuchClass: OSStatus = -25306
/// A default keychain could not be found.
public let errSecNoDefaultKeychain: OSStatus = -25307
/// User interaction is not allowed.
public let errSecInteractionNotAllowed: OSStatus = -25308
/// The specified attribute could not be modified.
public let errSecReadOnlyAttr: OSStatus = -25309
/// This keychain was created by a different version of the system software.
public let errSecWrongSecVersion: OSStatus = -25310
/// This item specifies a key size which is too large or too small.
public let errSecKeySizeNotAllowed: OSStatus = -25311
/// User interaction is required, but is currently not allowed.
public let errSecInteractionRequired: OSStatus = -25315
/// The contents of this item cannot be retrieved.
public let errSecDataNotAvailable: OSStatus = -25316
/// The contents of this item cannot be modified.
public let errSecDataNotModifiable: OSStatus = -25317
/// The operation was not allowed in dark wake.
public let errSecInDarkWake: OSStatus = -25320
/// Unable to decode the provided data.
public let errSecDecode: OSStatus = -26275
/// The requested service is not available.
public let errSecServiceNotAvailable: OSStatus = -67585
/// The data is not valid.
public let errSecInvalidData: OSStatus = -67673
/// The key reference is not valid.
public let errSecInvalidKeyRef: OSStatus = -67712
/// An invalid algorithm was encountered.
public let errSecInvalidAlgorithm: OSStatus = -67747
/// A cryptographic verification failure has occurred.
public let errSecVerifyFailed: OSStatus = -67808
/// An invalid value was detected.
public let errSecInvalidValue: OSStatus = -67694
/// A required value is missing.
public let errSecMissingValue: OSStatus = -67871

private let errorMessages: [OSStatus: String] = [
    errSecSuccess: "No error.",
    errSecUnimplemented: "Function or operation not implemented.",
    errSecDiskFull: "The disk is full.",
    errSecIO: "I/O error.",
    errSecParam: "One or more parameters passed to a function were not valid.",
    errSecAllocate: "Failed to allocate memory.",
    errSecUserCanceled: "User canceled the operation.",
    errSecBadReq: "Bad parameter or invalid state for operation.",
    errSecInternalComponent: "An internal component failed.",
    errSecCoreFoundationUnknown: "An unknown Core Foundation error occurred.",
    errSecMissingEntitlement: "A required entitlement isn't present.",
    errSecRestrictedAPI: "Client is restricted and is not permitted to perform this operation.",
    errSecNotAvailable: "No keychain is available.",
    errSecReadOnly: "This keychain cannot be modified.",
    errSecAuthFailed: "The user name or passphrase you entered is not correct.",
    errSecNoSuchKeychain: "The specified keychain could not be found.",
    errSecInvalidKeychain: "The specified keychain is not a valid keychain file.",
    errSecDuplicateKeychain: "A keychain with the same name already exists.",
    errSecDuplicateCallback: "The specified callback function is already installed.",
    errSecInvalidCallback: "The specified callback function is not valid.",
    errSecDuplicateItem: "The specified item already exists in the keychain.",
    errSecItemNotFound: "The specified item could not be found in the keychain.",
    errSecBufferTooSmall: "There is not enough memory available to use the specified item.",
    errSecDataTooLarge: "This item contains information which is too large or in a format that cannot be displayed.",
    errSecNoSuchAttr: "The specified attribute does not exist.",
    errSecInvalidItemRef: "The specified item is no longer valid. It may have been deleted from the keychain.",
    errSecInvalidSearchRef: "Unable to search the current keychain.",
    errSecNoSuchClass: "The specified item does not appear to be a valid keychain item.",
    errSecNoDefaultKeychain: "A default keychain could not be found.",
    errSecInteractionNotAllowed: "User interaction is not allowed.",
    errSecReadOnlyAttr: "The specified attribute could not be modified.",
    errSecWrongSecVersion: "This keychain was created by a different version of the system software.",
    errSecKeySizeNotAllowed: "This item specifies a key size which is too large or too small.",
    errSecInteractionRequired: "User interaction is required, but is currently not allowed.",
    errSecDataNotAvailable: "The contents of this item cannot be retrieved.",
    errSecDataNotModifiable: "The contents of this item cannot be modified.",
    errSecInDarkWake: "The operation was not allowed in dark wake.",
    errSecDecode: "Unable to decode the provided data.",
    errSecServiceNotAvailable: "The required service is not available.",
    errSecInvalidData: "The data is not valid.",
    errSecInvalidKeyRef: "The key reference is not valid.",
    errSecInvalidAlgorithm: "An invalid algorithm was encountered.",
    errSecVerifyFailed: "A cryptographic verification failure has occurred.",
    errSecInvalidValue: "An invalid value was detected.",
    errSecMissingValue: "A required value is missing.",
]

/// A sentence that describes `status`, as `SecCopyErrorMessageString` returns on Apple platforms.
///
/// - Parameters:
///   - status: an `OSStatus` from a Security function.
///   - reserved: pass `nil`.
/// - Returns: the message; for a code Security does not define, `"OSStatus <code>"`.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    errorMessages[status] ?? "OSStatus \(status)"
}
