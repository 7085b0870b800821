import Foundation
import SecurityProtocol

/// The conditions an access-control list sets (`SecAccessControlCreateFlags`), with Apple's raw values.
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    /// The raw option bits.
    public var rawValue: CFOptionFlags

    /// Creates flags from their raw bits.
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    /// Biometry or the device passcode.
    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    /// Any enrolled finger.
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// Any enrolled finger (deprecated spelling).
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// The fingers enrolled when the item was created; invalid once the set changes.
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The fingers enrolled when the item was created (deprecated spelling).
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The device passcode.
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    /// A paired watch (deprecated by Apple).
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// A paired companion device.
    public static let companion = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// At least one constraint must be satisfied.
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    /// Every constraint must be satisfied.
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    /// The constraints apply to private-key operations.
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    /// An application password is part of the item's key.
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)

    static let known: SecAccessControlCreateFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion, .or, .and,
        .privateKeyUsage, .applicationPassword,
    ]
}

/// An access-control list for a keychain item: a protection class and the authentication its use requires.
///
/// Stored with the item (`kSecAttrAccessControl`). Reading such an item's data needs an `LAContext` (passed as
/// `kSecUseAuthenticationContext`) whose credential satisfies the list; otherwise the engine prompts through the
/// context's presenter (or the terminal), or fails with `errSecInteractionNotAllowed` when it may not
/// (`kSecUseAuthenticationUIFail`, `interactionNotAllowed`, no presenter) or skips the item
/// (`kSecUseAuthenticationUISkip`). A cancelled prompt is `errSecUserCanceled`, any other failed authentication
/// `errSecAuthFailed`, as Apple maps `LAError`s. Its attributes stay readable, as on Apple platforms.
///
/// `.biometryCurrentSet` is bound to the enrolled fingerprints when the item is added; after any enrollment change
/// the item is unusable for good (`errSecAuthFailed`). `.applicationPassword` items are sealed with a key derived
/// from the context's application password (`LAContext.setCredential(_:type:)`), which adding and reading need.
public final class SecAccessControl: Sendable, Hashable {
    package let policy: AccessControlPolicy

    package init(policy: AccessControlPolicy) {
        self.policy = policy
    }

    /// The protection class (a `kSecAttrAccessible…` value).
    public var protection: CFString { policy.protection as CFString }

    /// The flags it was created with.
    public var flags: SecAccessControlCreateFlags { SecAccessControlCreateFlags(rawValue: CFOptionFlags(policy.flags)) }

    /// Whether both lists name the same protection class and flags.
    public static func == (lhs: SecAccessControl, rhs: SecAccessControl) -> Bool { lhs.policy == rhs.policy }

    /// Hashes the protection class and flags.
    public func hash(into hasher: inout Hasher) { hasher.combine(policy) }
}

/// Creates an access-control list for a keychain item.
///
/// - Parameters:
///   - allocator: ignored (pass `nil` or `kCFAllocatorDefault`).
///   - protection: a `kSecAttrAccessible…` value. Typed `Any` (Apple: `CFTypeRef`) because Linux Swift does not
///     convert a `String` to `AnyObject` implicitly; the constants pass unchanged.
///   - flags: the authentication required.
///   - error: receives an `NSOSStatusErrorDomain` error with `errSecParam` on failure.
/// - Returns: the list, or nil for an unknown protection class, unknown flag bits, or `.or` together with `.and`.
@discardableResult
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: Any, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    let protectionName = (protection as? String) ?? ""
    let validProtections: Set<String> = ["ak", "ck", "dk", "aku", "cku", "dku", "akpu"]
    guard validProtections.contains(protectionName), SecAccessControlCreateFlags.known.isSuperset(of: flags),
        !flags.isSuperset(of: [.or, .and])
    else {
        error?.pointee = Unmanaged.passRetained(NSError(domain: NSOSStatusErrorDomain, code: Int(errSecParam)))
        return nil
    }
    return SecAccessControl(policy: AccessControlPolicy(protection: protectionName, flags: UInt64(flags.rawValue)))
}
