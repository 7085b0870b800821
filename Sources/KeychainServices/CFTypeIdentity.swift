import Foundation

// Core Foundation's type identities and CFError accessors, as Apple code calls them:
// `CFGetTypeID(ref) == SecKeyGetTypeID()` to check what a `CFTypeRef` holds, `CFErrorGetCode(error)` to read a
// status out of an error a Security function reported.

/// A Core Foundation type identifier (`CFTypeID`).
public typealias CFTypeID = UInt

/// A signed count or index (`CFIndex`).
public typealias CFIndex = Int

/// An error domain (`CFErrorDomain`).
public typealias CFErrorDomain = CFString

/// The type identifier of `SecKey` objects.
@discardableResult
public func SecKeyGetTypeID() -> CFTypeID { CFTypeIdentity.secKey }

/// The type identifier of `SecAccessControl` objects.
@discardableResult
public func SecAccessControlGetTypeID() -> CFTypeID { CFTypeIdentity.secAccessControl }

/// The type identifier of `SecAccess` objects (macOS).
@discardableResult
public func SecAccessGetTypeID() -> CFTypeID { CFTypeIdentity.secAccess }

/// The type identifier of `SecTrustedApplication` objects (macOS).
@discardableResult
public func SecTrustedApplicationGetTypeID() -> CFTypeID { CFTypeIdentity.secTrustedApplication }

/// The type identifier of `SecCertificate` objects.
@discardableResult
public func SecCertificateGetTypeID() -> CFTypeID { CFTypeIdentity.secCertificate }

/// The type identifier of `SecIdentity` objects.
@discardableResult
public func SecIdentityGetTypeID() -> CFTypeID { CFTypeIdentity.secIdentity }

/// The type identifier of `CFString` objects.
public func CFStringGetTypeID() -> CFTypeID { CFTypeIdentity.string }

/// The type identifier of `CFData` objects.
public func CFDataGetTypeID() -> CFTypeID { CFTypeIdentity.data }

/// The type identifier of `CFDictionary` objects.
public func CFDictionaryGetTypeID() -> CFTypeID { CFTypeIdentity.dictionary }

/// The type identifier of `CFArray` objects.
public func CFArrayGetTypeID() -> CFTypeID { CFTypeIdentity.array }

/// The type identifier of `CFNumber` objects (booleans are numbers here, as `NSNumber` bridges them).
public func CFNumberGetTypeID() -> CFTypeID { CFTypeIdentity.number }

/// The type identifier of `CFError` objects.
public func CFErrorGetTypeID() -> CFTypeID { CFTypeIdentity.error }

/// The type identifier of `cf`: one of the `…GetTypeID()` values above, or 0 for an object of another type.
public func CFGetTypeID(_ cf: CFTypeRef?) -> CFTypeID {
    switch cf {
    case is SecKey: CFTypeIdentity.secKey
    case is SecAccessControl: CFTypeIdentity.secAccessControl
    case is SecAccess: CFTypeIdentity.secAccess
    case is SecTrustedApplication: CFTypeIdentity.secTrustedApplication
    case is SecCertificate: CFTypeIdentity.secCertificate
    case is SecIdentity: CFTypeIdentity.secIdentity
    case is NSString: CFTypeIdentity.string
    case is NSData: CFTypeIdentity.data
    case is NSDictionary: CFTypeIdentity.dictionary
    case is NSArray: CFTypeIdentity.array
    case is NSNumber: CFTypeIdentity.number
    case is NSError: CFTypeIdentity.error
    default: 0
    }
}

/// The code of `err`: for errors Security functions report, the `OSStatus`.
public func CFErrorGetCode(_ err: CFError!) -> CFIndex { err.code }

/// The domain of `err`: `NSOSStatusErrorDomain` for errors Security functions report.
public func CFErrorGetDomain(_ err: CFError!) -> CFErrorDomain! { err.domain as CFErrorDomain }

/// The user-info dictionary of `err` (empty when it has none).
public func CFErrorCopyUserInfo(_ err: CFError!) -> CFDictionary! { err.userInfo as NSDictionary }

/// A description of `err` for people.
public func CFErrorCopyDescription(_ err: CFError!) -> CFString! { err.localizedDescription as CFString }

/// Fixed identifiers for the types above; arbitrary but stable for the life of the process, as Apple's are.
enum CFTypeIdentity {
    static let string: CFTypeID = 7
    static let dictionary: CFTypeID = 18
    static let array: CFTypeID = 19
    static let data: CFTypeID = 20
    static let number: CFTypeID = 22
    static let error: CFTypeID = 31
    static let secCertificate: CFTypeID = 301
    static let secIdentity: CFTypeID = 302
    static let secKey: CFTypeID = 303
    static let secAccessControl: CFTypeID = 304
    static let secAccess: CFTypeID = 305
    static let secTrustedApplication: CFTypeID = 306
}
