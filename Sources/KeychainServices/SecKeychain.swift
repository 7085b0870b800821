import Foundation
import Synchronization

// The macOS keychain's password functions (SecKeychain.h, SecKeychainItem.h), which Apple's Keychain Services
// guide for macOS teaches and older command-line tools still call, over the same items `SecItem…` sees: a password
// added with `SecKeychainAddInternetPassword` is found by `SecItemCopyMatching` and back, in the user's keychain
// (embedded or through localauthd, as the client is chosen), with the same access groups and trusted-application
// lists: an item added here trusts the adding program alone, as on macOS. Apple's signatures as Swift imports them,
// and Apple's statuses.

/// A keychain: here the user's one keychain (Apple's login keychain), whichever client serves it.
public final class SecKeychain: Sendable {
    init() {}
}

/// An item of the keychain, as the password functions return it: it names the item by its persistent reference,
/// so it stays valid while attributes change.
public final class SecKeychainItem: Sendable {
    let persistentReference: Data
    let itemClass: String

    init(persistentReference: Data, itemClass: String) {
        self.persistentReference = persistentReference
        self.itemClass = itemClass
    }
}

/// An attribute of a keychain item in the macOS functions' lists (`SecKeychainAttribute`).
public struct SecKeychainAttribute {
    /// The attribute (`kSecAccountItemAttr`, `kSecServiceItemAttr`, `kSecLabelItemAttr`…).
    public var tag: SecKeychainAttrType
    /// The length of `data` in bytes.
    public var length: UInt32
    /// The attribute's bytes.
    public var data: UnsafeMutableRawPointer?

    /// An attribute with these values.
    public init(tag: SecKeychainAttrType, length: UInt32, data: UnsafeMutableRawPointer?) {
        self.tag = tag
        self.length = length
        self.data = data
    }
}

/// A list of attributes (`SecKeychainAttributeList`).
public struct SecKeychainAttributeList {
    /// How many attributes `attr` points to.
    public var count: UInt32
    /// The attributes.
    public var attr: UnsafeMutablePointer<SecKeychainAttribute>?

    /// A list of `count` attributes at `attr`.
    public init(count: UInt32, attr: UnsafeMutablePointer<SecKeychainAttribute>?) {
        self.count = count
        self.attr = attr
    }
}

/// An attribute's tag (a four-character code, `kSecAccountItemAttr` and the others).
public typealias SecKeychainAttrType = OSType

/// A four-character code.
public typealias OSType = FourCharCode
/// A four-character code.
public typealias FourCharCode = UInt32

/// `'acct'`: the account.
public let kSecAccountItemAttr: SecKeychainAttrType = 0x6163_6374
/// `'svce'`: the service.
public let kSecServiceItemAttr: SecKeychainAttrType = 0x7376_6365
/// `'labl'`: the label.
public let kSecLabelItemAttr: SecKeychainAttrType = 0x6C61_626C
/// `'desc'`: the description.
public let kSecDescriptionItemAttr: SecKeychainAttrType = 0x6465_7363
/// `'icmt'`: the comment.
public let kSecCommentItemAttr: SecKeychainAttrType = 0x6963_6D74

/// The protocol of an internet password (Apple's `SecProtocolType`, four-character codes).
public enum SecProtocolType: FourCharCode, Sendable {
    case FTP = 0x6674_7020, FTPAccount = 0x6674_7061, HTTP = 0x6874_7470, IRC = 0x6972_6320, NNTP = 0x6E6E_7470
    case POP3 = 0x706F_7033, SMTP = 0x736D_7470, SOCKS = 0x736F_7820, IMAP = 0x696D_6170, LDAP = 0x6C64_6170
    case appleTalk = 0x61746C6B, AFP = 0x6166_7020, telnet = 0x7465_6C6E, SSH = 0x7373_6820, FTPS = 0x6674_7073
    case HTTPS = 0x6874_7073, HTTPProxy = 0x6874_7078, HTTPSProxy = 0x6874_7378, FTPProxy = 0x6674_7078
    case CIFS = 0x6369_6673, SMB = 0x736D_6220, RTSP = 0x7274_7370, RTSPProxy = 0x7274_7378, DAAP = 0x6461_6170
    case EPPC = 0x6570_7063, IPP = 0x6970_7020, NNTPS = 0x6E74_7073, LDAPS = 0x6C64_7073, telnetS = 0x7465_6C73
    case IMAPS = 0x696D_7073, IRCS = 0x6972_6373, POP3S = 0x706F_7073, CVSpserver = 0x6376_7370, SVN = 0x7376_6E20
    case any = 0

    /// The value `kSecAttrProtocol` holds for it (`kSecAttrProtocolHTTPS` is `"htps"`); nil for `.any`.
    var attribute: String? {
        guard self != .any else { return nil }
        let bytes = withUnsafeBytes(of: rawValue.bigEndian) { Array($0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// How an internet password authenticates (Apple's `SecAuthenticationType`; its raw values are the four-character
/// codes byte-swapped, as Apple's header defines them on little-endian machines).
public enum SecAuthenticationType: FourCharCode, Sendable {
    case NTLM = 0x6D6C_746E, MSN = 0x616E_736D, DPA = 0x6161_7064, RPA = 0x6161_7072, HTTPBasic = 0x7074_7468
    case HTTPDigest = 0x6474_7468, htmlForm = 0x6D72_6F66, `default` = 0x746C_6664, any = 0

    /// The value `kSecAttrAuthenticationType` holds for it (`kSecAttrAuthenticationTypeDefault` is `"dflt"`).
    var attribute: String? {
        guard self != .any else { return nil }
        let bytes = withUnsafeBytes(of: rawValue.littleEndian) { Array($0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The default keychain: the user's.
@discardableResult
public func SecKeychainCopyDefault(_ keychain: UnsafeMutablePointer<SecKeychain?>) -> OSStatus {
    keychain.pointee = SecKeychain()
    return errSecSuccess
}

/// Adds a generic password (`kSecClassGenericPassword`) for `serviceName` and `accountName`.
///
/// - Returns: `errSecSuccess`; `errSecDuplicateItem` when one exists for the service and account; `errSecParam` for a
///   missing password; the item in `itemRef` when given.
@discardableResult
public func SecKeychainAddGenericPassword(
    _ keychain: SecKeychain?, _ serviceNameLength: UInt32, _ serviceName: UnsafePointer<CChar>?,
    _ accountNameLength: UInt32, _ accountName: UnsafePointer<CChar>?, _ passwordLength: UInt32,
    _ passwordData: UnsafeRawPointer, _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    var attributes: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
    attributes[kSecAttrService as String] = KeychainNames.string(serviceName, serviceNameLength) ?? ""
    attributes[kSecAttrAccount as String] = KeychainNames.string(accountName, accountNameLength) ?? ""
    return KeychainNames.add(attributes, Data(bytes: passwordData, count: Int(passwordLength)), itemRef)
}

/// Finds the generic password for `serviceName` and `accountName` (either may be nil: any).
///
/// - Returns: `errSecSuccess`, with the password in a buffer `passwordData` points to (free it with
///   `SecKeychainItemFreeContent`) and its length; `errSecItemNotFound`.
@discardableResult
public func SecKeychainFindGenericPassword(
    _ keychainOrArray: CFTypeRef?, _ serviceNameLength: UInt32, _ serviceName: UnsafePointer<CChar>?,
    _ accountNameLength: UInt32, _ accountName: UnsafePointer<CChar>?,
    _ passwordLength: UnsafeMutablePointer<UInt32>?, _ passwordData: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
    query[kSecAttrService as String] = KeychainNames.string(serviceName, serviceNameLength)
    query[kSecAttrAccount as String] = KeychainNames.string(accountName, accountNameLength)
    return KeychainNames.find(query, passwordLength, passwordData, itemRef)
}

/// Adds an internet password (`kSecClassInternetPassword`).
///
/// - Returns: as ``SecKeychainAddGenericPassword(_:_:_:_:_:_:_:_:)``.
@discardableResult
public func SecKeychainAddInternetPassword(
    _ keychain: SecKeychain?, _ serverNameLength: UInt32, _ serverName: UnsafePointer<CChar>?,
    _ securityDomainLength: UInt32, _ securityDomain: UnsafePointer<CChar>?, _ accountNameLength: UInt32,
    _ accountName: UnsafePointer<CChar>?, _ pathLength: UInt32, _ path: UnsafePointer<CChar>?, _ port: UInt16,
    _ protocol: SecProtocolType, _ authenticationType: SecAuthenticationType, _ passwordLength: UInt32,
    _ passwordData: UnsafeRawPointer, _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    var attributes = KeychainNames.internetPassword(
        KeychainNames.string(serverName, serverNameLength), KeychainNames.string(securityDomain, securityDomainLength),
        KeychainNames.string(accountName, accountNameLength), KeychainNames.string(path, pathLength), port,
        `protocol`, authenticationType)
    // An item names a server and an account, empty when not given.
    attributes[kSecAttrServer as String] = attributes[kSecAttrServer as String] ?? ""
    attributes[kSecAttrAccount as String] = attributes[kSecAttrAccount as String] ?? ""
    return KeychainNames.add(attributes, Data(bytes: passwordData, count: Int(passwordLength)), itemRef)
}

/// Finds an internet password; nil names, port 0 and `.any` match any value.
///
/// - Returns: as ``SecKeychainFindGenericPassword(_:_:_:_:_:_:_:_:)``.
@discardableResult
public func SecKeychainFindInternetPassword(
    _ keychainOrArray: CFTypeRef?, _ serverNameLength: UInt32, _ serverName: UnsafePointer<CChar>?,
    _ securityDomainLength: UInt32, _ securityDomain: UnsafePointer<CChar>?, _ accountNameLength: UInt32,
    _ accountName: UnsafePointer<CChar>?, _ pathLength: UInt32, _ path: UnsafePointer<CChar>?, _ port: UInt16,
    _ protocol: SecProtocolType, _ authenticationType: SecAuthenticationType,
    _ passwordLength: UnsafeMutablePointer<UInt32>?, _ passwordData: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    let query = KeychainNames.internetPassword(
        KeychainNames.string(serverName, serverNameLength), KeychainNames.string(securityDomain, securityDomainLength),
        KeychainNames.string(accountName, accountNameLength), KeychainNames.string(path, pathLength), port,
        `protocol`, authenticationType)
    return KeychainNames.find(query, passwordLength, passwordData, itemRef)
}

/// Changes an item's data (`data`, `length` bytes; nil leaves it) and the attributes `attrList` names (account,
/// service, label, description, comment; nil changes none).
///
/// - Returns: `errSecSuccess`; `errSecItemNotFound` when the item is gone; `errSecNoSuchAttr` for an attribute this
///   keychain does not change through this call.
@discardableResult
public func SecKeychainItemModifyAttributesAndData(
    _ itemRef: SecKeychainItem, _ attrList: UnsafePointer<SecKeychainAttributeList>?, _ length: UInt32,
    _ data: UnsafeRawPointer?
) -> OSStatus {
    var changes: [String: Any] = [:]
    if let data { changes[kSecValueData as String] = Data(bytes: data, count: Int(length)) }
    if let list = attrList?.pointee, let attributes = list.attr {
        for index in 0..<Int(list.count) {
            let attribute = attributes[index]
            guard let name = KeychainNames.attributeNames[attribute.tag] else { return errSecNoSuchAttr }
            let bytes = attribute.data.map { Data(bytes: $0, count: Int(attribute.length)) } ?? Data()
            changes[name] = String(decoding: bytes, as: UTF8.self)
        }
    }
    guard !changes.isEmpty else { return errSecSuccess }
    return SecItemUpdate(KeychainNames.query(itemRef) as CFDictionary, changes as CFDictionary)
}

/// Deletes the item.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound` when it is gone already.
@discardableResult
public func SecKeychainItemDelete(_ itemRef: SecKeychainItem) -> OSStatus {
    SecItemDelete(KeychainNames.query(itemRef) as CFDictionary)
}

/// Frees what the find functions returned: the password buffer (zeroed first) and an attribute list.
@discardableResult
public func SecKeychainItemFreeContent(
    _ attrList: UnsafeMutablePointer<SecKeychainAttributeList>?, _ data: UnsafeMutableRawPointer?
) -> OSStatus {
    if let data {
        let address = UInt(bitPattern: data)
        let length = KeychainNames.allocations.withLock { $0.removeValue(forKey: address) } ?? 0
        memset(data, 0, length)
        free(data)
    }
    if let list = attrList?.pointee, let attributes = list.attr {
        for index in 0..<Int(list.count) { free(attributes[index].data) }
        free(attributes)
    }
    return errSecSuccess
}

/// The bridge from the macOS functions to `SecItem…`.
enum KeychainNames {
    /// The buffers handed out with their lengths, so that freeing zeroes the whole password.
    static let allocations = Mutex<[UInt: Int]>([:])

    /// The attribute tags the modify call changes, by item attribute name.
    static let attributeNames: [SecKeychainAttrType: String] = [
        kSecAccountItemAttr: "acct", kSecServiceItemAttr: "svce", kSecLabelItemAttr: "labl",
        kSecDescriptionItemAttr: "desc", kSecCommentItemAttr: "icmt",
    ]

    /// An internet password's attributes: those given (nil names, port 0 and `.any` leave theirs out).
    static func internetPassword(
        _ server: String?, _ securityDomain: String?, _ account: String?, _ path: String?, _ port: UInt16,
        _ protocol: SecProtocolType, _ authenticationType: SecAuthenticationType
    ) -> [String: Any] {
        var attributes: [String: Any] = [kSecClass as String: kSecClassInternetPassword]
        attributes[kSecAttrServer as String] = server
        attributes[kSecAttrSecurityDomain as String] = securityDomain
        attributes[kSecAttrAccount as String] = account
        attributes[kSecAttrPath as String] = path
        if port != 0 { attributes[kSecAttrPort as String] = Int(port) }
        attributes[kSecAttrProtocol as String] = `protocol`.attribute
        attributes[kSecAttrAuthenticationType as String] = authenticationType.attribute
        return attributes
    }

    /// `length` bytes of UTF-8 at `pointer`; nil for a nil pointer.
    static func string(_ pointer: UnsafePointer<CChar>?, _ length: UInt32) -> String? {
        guard let pointer else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(length)), as: UTF8.self)
    }

    /// `SecItemAdd` of `attributes` with `password`, returning the item's reference in `itemRef`.
    static func add(_ attributes: [String: Any], _ password: Data, _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?)
        -> OSStatus
    {
        var attributes = attributes
        attributes[kSecValueData as String] = password
        // As the macOS keychain gives an item these functions add: a list of trusted applications naming the adding
        // program alone (other programs of its access group are asked), described by its service or server.
        var access: SecAccess?
        let descriptor =
            (attributes[kSecAttrService as String] ?? attributes[kSecAttrServer as String]) as? String ?? ""
        guard SecAccessCreate(descriptor as CFString, nil, &access) == errSecSuccess, let access else {
            return errSecInternalComponent
        }
        attributes[kSecAttrAccess as String] = access
        if itemRef != nil { attributes[kSecReturnPersistentRef as String] = true }
        var result: CFTypeRef?
        let status =
            itemRef == nil
            ? SecItemAdd(attributes as CFDictionary, nil) : SecItemAdd(attributes as CFDictionary, &result)
        guard status == errSecSuccess else { return status }
        if let itemRef {
            guard let reference = result as? Data, let itemClass = attributes[kSecClass as String] as? String else {
                return errSecInternalComponent
            }
            itemRef.pointee = SecKeychainItem(persistentReference: reference, itemClass: itemClass)
        }
        return errSecSuccess
    }

    /// `SecItemCopyMatching` of the first match of `query`: its data in a new buffer and its reference.
    static func find(
        _ query: [String: Any], _ passwordLength: UnsafeMutablePointer<UInt32>?,
        _ passwordData: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
        _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
    ) -> OSStatus {
        var query = query
        let wantsData = passwordData != nil || passwordLength != nil
        if wantsData { query[kSecReturnData as String] = true }
        // Attributes too, so that the result is a dictionary whatever else is asked.
        query[kSecReturnAttributes as String] = true
        query[kSecReturnPersistentRef as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { return status }
        let found = result as? [String: Any] ?? [:]
        let data = found[kSecValueData as String] as? Data ?? Data()
        passwordLength?.pointee = UInt32(data.count)
        if let passwordData {
            let buffer = malloc(max(data.count, 1))!
            data.copyBytes(to: buffer.assumingMemoryBound(to: UInt8.self), count: data.count)
            let (address, count) = (UInt(bitPattern: buffer), data.count)
            allocations.withLock { $0[address] = count }
            passwordData.pointee = buffer
        }
        if let itemRef {
            guard let reference = found[kSecValuePersistentRef as String] as? Data,
                let itemClass = query[kSecClass as String] as? String
            else { return errSecInternalComponent }
            itemRef.pointee = SecKeychainItem(persistentReference: reference, itemClass: itemClass)
        }
        return errSecSuccess
    }

    /// The query that names `item`.
    static func query(_ item: SecKeychainItem) -> [String: Any] {
        [kSecClass as String: item.itemClass, kSecValuePersistentRef as String: item.persistentReference]
    }
}
