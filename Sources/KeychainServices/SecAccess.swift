import Foundation
import SecurityProtocol

/// A program a keychain item may trust (macOS's `SecTrustedApplication`): an executable, named by its path and
/// the SHA-256 of its contents when the object was made. Made with ``SecTrustedApplicationCreateFromPath(_:_:)``.
public final class SecTrustedApplication: Sendable, Hashable {
    package let application: TrustedApplication

    package init(_ application: TrustedApplication) {
        self.application = application
    }

    /// The executable's path; empty for "the calling program".
    public var path: String { application.executable }

    /// The executable's SHA-256 (32 bytes); empty for "the calling program", which the keychain identifies itself.
    public var codeDigest: Data { application.codeDigest }

    /// The application identifier the keychain gave the program when it was listed (from the app registry, or
    /// `unregistered.<sha256>`); empty until the item is stored.
    public var applicationIdentifier: String { application.applicationIdentifier }

    /// Equal when they name the same program (executable, application identifier and code digest).
    public static func == (lhs: SecTrustedApplication, rhs: SecTrustedApplication) -> Bool {
        lhs.application == rhs.application
    }

    /// Hashes the program, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(application) }
}

/// A keychain item's trusted-application list (macOS's `SecAccess`; the item's `kSecAttrAccess`).
///
/// The programs it names use the item without a question. Any other program that holds the item's access group
/// is asked through its presenter ("<app> wants to use the item <label>": Deny, Allow once, Always allow); a listed
/// program whose executable changed since is asked again ("<app> has changed"). Either allow then needs the
/// user's finger on the reader or passcode, checked by the keychain itself, so a program cannot let itself in by
/// answering its own question. Always allow adds the program to the list. Reading the item's attributes is not
/// guarded; its data, its key, updating and deleting it are.
///
/// `kSecAttrAccess` and `kSecAttrAccessControl` are exclusive, as on macOS.
public final class SecAccess: Sendable, Hashable {
    package let access: ItemAccess

    package init(_ access: ItemAccess) {
        self.access = access
    }

    /// The description given to ``SecAccessCreate(_:_:_:)``.
    public var descriptor: String { access.descriptor }

    /// The programs the item trusts.
    public var trustedApplications: [SecTrustedApplication] { access.applications.map(SecTrustedApplication.init) }

    /// Equal when they hold the same descriptor and programs.
    public static func == (lhs: SecAccess, rhs: SecAccess) -> Bool { lhs.access == rhs.access }

    /// Hashes the list, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(access) }
}

/// Makes a trusted application for the executable at `path`, or for the calling program when `path` is nil.
///
/// - Returns: `errSecSuccess`; `errSecParam` when `app` is nil; `errSecItemNotFound` (Apple's `CSSMERR_…` has no
///   Linux meaning) when the file cannot be read.
@discardableResult
public func SecTrustedApplicationCreateFromPath(
    _ path: UnsafePointer<Int8>?, _ app: UnsafeMutablePointer<SecTrustedApplication?>
) -> OSStatus {
    guard let path else {
        app.pointee = SecTrustedApplication(.caller)
        return errSecSuccess
    }
    guard let application = TrustedApplication.reading(String(cString: path)) else { return errSecItemNotFound }
    app.pointee = SecTrustedApplication(application)
    return errSecSuccess
}

/// Copies what identifies a trusted application: its executable's path, as UTF-8 bytes (empty for the calling
/// program).
@discardableResult
public func SecTrustedApplicationCopyData(_ appRef: SecTrustedApplication, _ data: UnsafeMutablePointer<CFData?>)
    -> OSStatus
{
    data.pointee = Data(appRef.path.utf8) as CFData
    return errSecSuccess
}

/// Makes a trusted-application list to add with an item as `kSecAttrAccess`.
///
/// - Parameters:
///   - descriptor: the name a question shows for an item that has no label.
///   - trustedlist: ``SecTrustedApplication``s; nil trusts the calling program alone, an empty array no program.
///   - accessRef: receives the list.
/// - Returns: `errSecSuccess`; `errSecParam` for an element that is not a ``SecTrustedApplication`` or more than
///   64 of them.
@discardableResult
public func SecAccessCreate(
    _ descriptor: CFString, _ trustedlist: CFArray?, _ accessRef: UnsafeMutablePointer<SecAccess?>
) -> OSStatus {
    var applications = [TrustedApplication.caller]
    if let trustedlist {
        let elements = trustedlist as [AnyObject]
        applications = elements.compactMap { ($0 as? SecTrustedApplication)?.application }
        guard applications.count == elements.count, applications.count <= ItemAccess.maximumApplications else {
            return errSecParam
        }
    }
    accessRef.pointee = SecAccess(ItemAccess(descriptor: descriptor as String, applications: applications))
    return errSecSuccess
}
