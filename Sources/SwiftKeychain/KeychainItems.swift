import Foundation
import KeychainServices
import SecureCrypto
import SecurityProtocol

/// A type the typed keychain API stores: `GenericPassword`, `InternetPassword` or `KeychainKey`.
public protocol KeychainItem: Sendable {}

/// How a typed item converts to and from the attributes the engine stores.
package protocol KeychainItemCoding: KeychainItem {
    /// The `kSecClass` of items of this type.
    static var itemClass: String { get }
    /// The attributes and data to store.
    var keychainAttributes: [String: KeychainValue] { get }
    /// An item from stored attributes and data; nil when they do not describe one.
    init?(keychainAttributes: [String: KeychainValue], data: Data?)
}

/// A program a password trusts: it uses the password without being asked (macOS's trusted applications,
/// `kSecAttrAccess`). Any other program that holds the item's access group is asked through its presenter ("<app>
/// wants to use the item …": Deny, Allow once, Always allow), and an allow then needs the user's finger or passcode,
/// checked by the keychain. A listed program whose executable changed is asked again ("<app> has changed").
public struct KeychainTrustedApplication: Sendable, Hashable {
    let application: TrustedApplication

    init(_ application: TrustedApplication) {
        self.application = application
    }

    /// The program making the request, as the keychain identifies it.
    public static let thisProgram = KeychainTrustedApplication(.caller)

    /// The executable at `path`, trusted by the SHA-256 of its contents now; nil when it cannot be read.
    public init?(executableAt path: String) {
        guard let application = TrustedApplication.reading(path) else { return nil }
        self.application = application
    }

    /// The executable's canonical path (empty for ``thisProgram`` before the item is stored).
    public var path: String { application.executable }
    /// The registered application identifier, or `unregistered.<sha256>`; empty before the item is stored.
    public var applicationIdentifier: String { application.applicationIdentifier }
    /// The SHA-256 of the executable it trusts.
    public var codeDigest: Data { application.codeDigest }
}

/// Attributes every typed item has.
private func commonAttributes(
    label: String?, accessGroup: String?, accessibility: KeychainAccessibility, isSynchronizable: Bool, data: Data,
    trustedApplications: [KeychainTrustedApplication]? = nil, name: String = ""
) -> [String: KeychainValue] {
    var attributes: [String: KeychainValue] = [
        ItemKey.accessible: .string(accessibility.rawValue), ItemKey.synchronizable: .bool(isSynchronizable),
        ItemKey.valueData: .secret(SecureBytes(data)),
    ]
    if let label { attributes[ItemKey.label] = .string(label) }
    if let accessGroup { attributes[ItemKey.accessGroup] = .string(accessGroup) }
    if let trustedApplications {
        attributes["acls"] = .access(
            ItemAccess(descriptor: label ?? name, applications: trustedApplications.map(\.application)))
    }
    return attributes
}

/// The attributes every typed item shares, read from a stored item's: nil when its accessibility is missing or
/// unknown.
private struct StoredCommonAttributes {
    var label: String?
    var accessGroup: String?
    var accessibility: KeychainAccessibility
    var isSynchronizable: Bool
    var trustedApplications: [KeychainTrustedApplication]?

    init?(_ attributes: [String: KeychainValue]) {
        guard
            let accessibility = attributes[ItemKey.accessible]?.stringValue.flatMap(
                KeychainAccessibility.init(rawValue:))
        else { return nil }
        self.accessibility = accessibility
        label = attributes[ItemKey.label]?.stringValue
        accessGroup = attributes[ItemKey.accessGroup]?.stringValue
        isSynchronizable = attributes[ItemKey.synchronizable]?.boolValue ?? false
        if case .access(let access)? = attributes["acls"] {
            trustedApplications = access.applications.map(KeychainTrustedApplication.init)
        }
    }
}

private func date(_ value: KeychainValue?) -> Date? {
    if case .date(let date) = value { return date }
    return nil
}

private func data(_ value: KeychainValue?) -> Data? {
    if case .data(let data) = value { return data }
    return nil
}

/// A generic password (`kSecClassGenericPassword`), unique by service and account within its access group.
public struct GenericPassword: KeychainItem, KeychainItemCoding, Hashable {
    package static var itemClass: String { "genp" }

    /// The service (`kSecAttrService`).
    public var service: String
    /// The account (`kSecAttrAccount`).
    public var account: String
    /// The secret. (Apple's API hands it out as `Data` too; keep copies short-lived.)
    public var password: Data
    /// A user-visible label (`kSecAttrLabel`).
    public var label: String?
    /// A comment (`kSecAttrComment`).
    public var comment: String?
    /// Where the item lives; nil = the caller's first access group.
    public var accessGroup: String?
    /// When the data can be read (`kSecAttrAccessible`).
    public var accessibility: KeychainAccessibility
    /// Whether the item is synchronizable (`kSecAttrSynchronizable`).
    public var isSynchronizable: Bool
    /// The programs that use the password without being asked; nil = no list (every program holding the access
    /// group uses it), empty = every program is asked.
    public var trustedApplications: [KeychainTrustedApplication]?
    /// Set by the keychain.
    public private(set) var creationDate: Date?
    /// Set by the keychain.
    public private(set) var modificationDate: Date?

    /// A generic password to add.
    public init(
        service: String, account: String, password: Data, label: String? = nil, comment: String? = nil,
        accessGroup: String? = nil, accessibility: KeychainAccessibility = .whenUnlocked,
        isSynchronizable: Bool = false, trustedApplications: [KeychainTrustedApplication]? = nil
    ) {
        self.service = service
        self.account = account
        self.password = password
        self.label = label
        self.comment = comment
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.isSynchronizable = isSynchronizable
        self.trustedApplications = trustedApplications
    }

    package var keychainAttributes: [String: KeychainValue] {
        var attributes = commonAttributes(
            label: label, accessGroup: accessGroup, accessibility: accessibility, isSynchronizable: isSynchronizable,
            data: password, trustedApplications: trustedApplications, name: service)
        attributes[ItemKey.service] = .string(service)
        attributes[ItemKey.account] = .string(account)
        if let comment { attributes["icmt"] = .string(comment) }
        return attributes
    }

    package init?(keychainAttributes attributes: [String: KeychainValue], data: Data?) {
        guard let service = attributes[ItemKey.service]?.stringValue,
            let account = attributes[ItemKey.account]?.stringValue, let common = StoredCommonAttributes(attributes)
        else { return nil }
        self.init(
            service: service, account: account, password: data ?? Data(), label: common.label,
            comment: attributes["icmt"]?.stringValue, accessGroup: common.accessGroup,
            accessibility: common.accessibility, isSynchronizable: common.isSynchronizable,
            trustedApplications: common.trustedApplications)
        creationDate = date(attributes["cdat"])
        modificationDate = date(attributes["mdat"])
    }
}

/// An internet password (`kSecClassInternetPassword`), unique by account, server, protocol, port, path, security
/// domain and authentication type within its access group.
public struct InternetPassword: KeychainItem, KeychainItemCoding, Hashable {
    package static var itemClass: String { "inet" }

    /// The server (`kSecAttrServer`).
    public var server: String
    /// The account (`kSecAttrAccount`).
    public var account: String
    /// The secret (`kSecValueData`).
    public var password: Data
    /// A `kSecAttrProtocol…` value; empty for none.
    public var `protocol`: String
    /// The port (`kSecAttrPort`); 0 for none.
    public var port: Int
    /// The path (`kSecAttrPath`).
    public var path: String
    /// The security domain (`kSecAttrSecurityDomain`).
    public var securityDomain: String
    /// A `kSecAttrAuthenticationType…` value; empty for none.
    public var authenticationType: String
    /// A user-visible label (`kSecAttrLabel`).
    public var label: String?
    /// The access group (`kSecAttrAccessGroup`); nil = the caller's first group.
    public var accessGroup: String?
    /// When the data can be read (`kSecAttrAccessible`).
    public var accessibility: KeychainAccessibility
    /// Whether the item is synchronizable (`kSecAttrSynchronizable`).
    public var isSynchronizable: Bool
    /// The programs that use the password without being asked; nil = no list, empty = every program is asked.
    public var trustedApplications: [KeychainTrustedApplication]?

    /// An internet password to add.
    public init(
        server: String, account: String, password: Data, protocol: String = "", port: Int = 0, path: String = "",
        securityDomain: String = "", authenticationType: String = "", label: String? = nil,
        accessGroup: String? = nil, accessibility: KeychainAccessibility = .whenUnlocked,
        isSynchronizable: Bool = false, trustedApplications: [KeychainTrustedApplication]? = nil
    ) {
        self.server = server
        self.account = account
        self.password = password
        self.protocol = `protocol`
        self.port = port
        self.path = path
        self.securityDomain = securityDomain
        self.authenticationType = authenticationType
        self.label = label
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.isSynchronizable = isSynchronizable
        self.trustedApplications = trustedApplications
    }

    package var keychainAttributes: [String: KeychainValue] {
        var attributes = commonAttributes(
            label: label, accessGroup: accessGroup, accessibility: accessibility, isSynchronizable: isSynchronizable,
            data: password, trustedApplications: trustedApplications, name: server)
        attributes["srvr"] = .string(server)
        attributes[ItemKey.account] = .string(account)
        attributes["ptcl"] = .string(`protocol`)
        attributes["port"] = .integer(Int64(port))
        attributes["path"] = .string(path)
        attributes["sdmn"] = .string(securityDomain)
        attributes["atyp"] = .string(authenticationType)
        return attributes
    }

    package init?(keychainAttributes attributes: [String: KeychainValue], data: Data?) {
        guard let server = attributes["srvr"]?.stringValue, let account = attributes[ItemKey.account]?.stringValue,
            let common = StoredCommonAttributes(attributes)
        else { return nil }
        self.init(
            server: server, account: account, password: data ?? Data(),
            protocol: attributes["ptcl"]?.stringValue ?? "", port: Int(attributes["port"]?.integerValue ?? 0),
            path: attributes["path"]?.stringValue ?? "", securityDomain: attributes["sdmn"]?.stringValue ?? "",
            authenticationType: attributes["atyp"]?.stringValue ?? "", label: common.label,
            accessGroup: common.accessGroup, accessibility: common.accessibility,
            isSynchronizable: common.isSynchronizable, trustedApplications: common.trustedApplications)
    }
}

/// A key stored as an item (`kSecClassKey`), unique by class, type, size, application tag and label.
public struct KeychainKey: KeychainItem, KeychainItemCoding, Hashable {
    package static var itemClass: String { "keys" }

    /// Public, private or symmetric, with Apple's `kSecAttrKeyClass…` values.
    public enum KeyClass: String, Sendable, Hashable {
        /// `kSecAttrKeyClassPublic`.
        case `public` = "0"
        /// `kSecAttrKeyClassPrivate`.
        case `private` = "1"
        /// `kSecAttrKeyClassSymmetric`.
        case symmetric = "2"
    }

    /// Public, private or symmetric (`kSecAttrKeyClass`).
    public var keyClass: KeyClass
    /// A `kSecAttrKeyType…` value (`"73"` for P-256).
    public var keyType: String
    /// The key size (`kSecAttrKeySizeInBits`).
    public var sizeInBits: Int
    /// The application tag (`kSecAttrApplicationTag`).
    public var applicationTag: Data
    /// The application label (`kSecAttrApplicationLabel`).
    public var applicationLabel: Data
    /// The key's bytes (for example a P-256 private key's X9.63 representation).
    public var keyData: Data
    /// A user-visible label (`kSecAttrLabel`).
    public var label: String?
    /// The access group (`kSecAttrAccessGroup`); nil = the caller's first group.
    public var accessGroup: String?
    /// When the data can be read (`kSecAttrAccessible`).
    public var accessibility: KeychainAccessibility

    /// A key to add.
    public init(
        keyClass: KeyClass, keyType: String, sizeInBits: Int, applicationTag: Data, applicationLabel: Data = Data(),
        keyData: Data, label: String? = nil, accessGroup: String? = nil,
        accessibility: KeychainAccessibility = .whenUnlocked
    ) {
        self.keyClass = keyClass
        self.keyType = keyType
        self.sizeInBits = sizeInBits
        self.applicationTag = applicationTag
        self.applicationLabel = applicationLabel
        self.keyData = keyData
        self.label = label
        self.accessGroup = accessGroup
        self.accessibility = accessibility
    }

    package var keychainAttributes: [String: KeychainValue] {
        var attributes = commonAttributes(
            label: label, accessGroup: accessGroup, accessibility: accessibility, isSynchronizable: false,
            data: keyData)
        attributes["kcls"] = .string(keyClass.rawValue)
        attributes["type"] = .string(keyType)
        attributes["bsiz"] = .integer(Int64(sizeInBits))
        attributes["esiz"] = .integer(Int64(sizeInBits))
        attributes["atag"] = .data(applicationTag)
        attributes["klbl"] = .data(applicationLabel)
        return attributes
    }

    package init?(keychainAttributes attributes: [String: KeychainValue], data: Data?) {
        guard let keyClass = attributes["kcls"]?.stringValue.flatMap(KeyClass.init(rawValue:)),
            let keyType = attributes["type"]?.stringValue, let common = StoredCommonAttributes(attributes)
        else { return nil }
        self.init(
            keyClass: keyClass, keyType: keyType, sizeInBits: Int(attributes["bsiz"]?.integerValue ?? 0),
            applicationTag: SwiftKeychain.data(attributes["atag"]) ?? Data(),
            applicationLabel: SwiftKeychain.data(attributes["klbl"]) ?? Data(), keyData: data ?? Data(),
            label: common.label, accessGroup: common.accessGroup, accessibility: common.accessibility)
    }
}

/// Which items of type `Item` to find, change or delete.
public struct KeychainQuery<Item: KeychainItem>: Sendable {
    var filters: [String: KeychainValue] = [:]
    var limit: Int?
    var includesData = true

    /// Every item of this type the caller may see.
    public init() {}

    /// At most `count` matches.
    public func limit(_ count: Int) -> KeychainQuery {
        var query = self
        query.limit = count
        return query
    }

    /// Matches items whose access group is `group`.
    public func accessGroup(_ group: String) -> KeychainQuery { adding(ItemKey.accessGroup, .string(group)) }

    /// Matches items whose label is `label`.
    public func label(_ label: String) -> KeychainQuery { adding(ItemKey.label, .string(label)) }

    /// Matches synchronizable and non-synchronizable items alike.
    public func includingSynchronizable() -> KeychainQuery { adding(ItemKey.synchronizable, .string("syna")) }

    /// Returns attributes only, without decrypting data.
    public func withoutData() -> KeychainQuery {
        var query = self
        query.includesData = false
        return query
    }

    func adding(_ key: String, _ value: KeychainValue) -> KeychainQuery {
        var query = self
        query.filters[key] = value
        return query
    }

    /// What `Keychain.update(_:setting:)` changes.
    public struct Change: Sendable {
        var attributes: [String: KeychainValue] = [:]
        var data: Data?

        /// A change of the item's data (its password or key bytes).
        public static func data(_ data: Data) -> Change { Change(data: data) }

        /// A change of the label.
        public static func label(_ label: String) -> Change { Change(attributes: [ItemKey.label: .string(label)]) }

        /// A change of the accessibility.
        public static func accessibility(_ accessibility: KeychainAccessibility) -> Change {
            Change(attributes: [ItemKey.accessible: .string(accessibility.rawValue)])
        }
    }
}

extension KeychainQuery where Item == GenericPassword {
    /// Generic passwords, optionally of one service and account.
    public static func genericPasswords(service: String? = nil, account: String? = nil) -> KeychainQuery {
        var query = KeychainQuery()
        if let service { query.filters[ItemKey.service] = .string(service) }
        if let account { query.filters[ItemKey.account] = .string(account) }
        return query
    }
}

extension KeychainQuery where Item == InternetPassword {
    /// Internet passwords, optionally of one server and account.
    public static func internetPasswords(server: String? = nil, account: String? = nil) -> KeychainQuery {
        var query = KeychainQuery()
        if let server { query.filters["srvr"] = .string(server) }
        if let account { query.filters[ItemKey.account] = .string(account) }
        return query
    }
}

extension KeychainQuery where Item == KeychainKey {
    /// Keys, optionally with one application tag and key class.
    public static func keys(applicationTag: Data? = nil, keyClass: KeychainKey.KeyClass? = nil) -> KeychainQuery {
        var query = KeychainQuery()
        if let applicationTag { query.filters["atag"] = .data(applicationTag) }
        if let keyClass { query.filters["kcls"] = .string(keyClass.rawValue) }
        return query
    }
}
