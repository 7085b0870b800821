import Foundation

// Core Foundation's names for the types Keychain Services' signatures use, as aliases over the Foundation types
// swift-corelibs-foundation provides, so code written for Apple platforms compiles unchanged:
// `query as CFDictionary` bridges a Swift dictionary to `NSDictionary`, `item as? Data` bridges `NSData` back.

/// A status code: `errSecSuccess` (0) or one of the `errSec…` values.
public typealias OSStatus = Int32

/// No error (`noErr`, from MacTypes.h): 0, the same as `errSecSuccess`.
public let noErr: OSStatus = 0

/// Any Core Foundation object: the type of `SecItemCopyMatching`'s result.
public typealias CFTypeRef = AnyObject

/// A dictionary of keychain attributes and query keys.
public typealias CFDictionary = NSDictionary

/// An array, as `SecItemCopyMatching` returns for several matches.
public typealias CFArray = NSArray

/// Bytes.
public typealias CFData = NSData

/// A string, an object as Apple's is (`NSString`, which bridges to `String` as Apple's `CFString` does): so
/// `kSecClass as String`, `[kSecClass: kSecClassGenericPassword] as CFDictionary`, a constant stored in a
/// `[String: AnyObject]` or passed as a `CFTypeRef` all compile as on Apple platforms.
public typealias CFString = NSString

/// What each `kSec…` string constant is: an `NSString` (an object, as Apple's `CFString` constants are) whose
/// `AnyHashable` is its `String`'s, as every `NSString`'s is on Apple platforms. swift-corelibs-foundation keeps an
/// `NSString` in its `AnyHashable`, where it differs from the same text as a `String`, so without this a constant
/// found nothing in a result read as `[AnyHashable: Any]` (`attributes[kSecAttrAccount]`, whose keys are `String`s)
/// and made `NSDictionary(dictionary:).isEqual(to:)` false against the same query written with strings.
final class ConstantString: NSString, _HasCustomAnyHashableRepresentation {
    // Immutable after init.
    private let value: String
    private let units: [unichar]

    init(_ text: String) {
        self.value = text
        units = Array(text.utf16)
        // The text goes to NSString's own storage too: swift-corelibs-foundation reads that storage, not `length`
        // and `character(at:)`, in `String(_:)`, property lists and archives, which read "" with an empty one.
        super.init(characters: units, length: units.count)
    }

    required init?(coder: NSCoder) { nil }
    required convenience init(string aString: String) { self.init(aString) }
    required convenience init(stringLiteral value: StaticString) { self.init(value.description) }
    required convenience init(unicodeScalarLiteral value: StaticString) { self.init(value.description) }
    required convenience init(extendedGraphemeClusterLiteral value: StaticString) { self.init(value.description) }

    override var length: Int { units.count }
    override func character(at index: Int) -> unichar { units[index] }
    override var description: String { value }
    override func copy(with zone: NSZone? = nil) -> Any { self }

    /// Its text as a `String`: what `AnyHashable` holds for it, so that it equals the same `String` as a key.
    func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(value) }

    /// The text, without bridging (the module's own comparisons).
    var string: String { value }
}

/// A number.
public typealias CFNumber = NSNumber

/// A boolean, as `kCFBooleanTrue` and `kCFBooleanFalse`.
public typealias CFBoolean = NSNumber

/// An error object, as `SecAccessControlCreateWithFlags` reports.
public typealias CFError = NSError

/// Option bits.
public typealias CFOptionFlags = UInt

/// The true boolean, for dictionaries written with `kCFBooleanTrue` (implicitly unwrapped, as Swift imports
/// Apple's, so `kCFBooleanTrue!` compiles too).
public var kCFBooleanTrue: CFBoolean! { NSNumber(value: true) }

/// The false boolean (implicitly unwrapped, as Apple's).
public var kCFBooleanFalse: CFBoolean! { NSNumber(value: false) }

/// A memory allocator. Only the default exists on Linux; arguments of this type are accepted and ignored.
public final class CFAllocator: Sendable {
    private init() {}
}

/// The default allocator: `nil`, as Apple's `kCFAllocatorDefault` means "the default".
public let kCFAllocatorDefault: CFAllocator? = nil

// `NSOSStatusErrorDomain`, the domain of errors that carry an `OSStatus`, comes from Foundation, as on Apple
// platforms; declaring it here too would make every Apple-style use of it ambiguous.

// Inside this module the constants are compared with the `String` keys and values of parsed dictionaries: these
// let `case kSecClass:` and `key == kSecUseAuthenticationContext` read as they did when the constants were strings.
func ~= (pattern: CFString, value: String) -> Bool { pattern.constantText == value }
func ~= (pattern: CFString, value: String?) -> Bool { value.map { pattern.constantText == $0 } ?? false }
func == (lhs: String, rhs: CFString) -> Bool { lhs == rhs.constantText }

extension NSString {
    /// The text: a constant's without bridging, any other's bridged.
    var constantText: String { (self as? ConstantString)?.string ?? (self as String) }
}
