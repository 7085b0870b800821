import Foundation
import KeychainServices
import SecureCrypto

/// A Secret Service item as the keychain keeps it.
struct StoredSecretItem: Equatable {
    /// The item's name in its collection (its object path's last part): the keychain item's account.
    var id: String
    var label: String
    var attributes: [String: String]
    var contentType: String
    /// Seconds since 1970.
    var created: UInt64
    var modified: UInt64
}

/// The Secret Service's persisted collections over the keychain: each item a generic password whose service is
/// `org.freedesktop.Secret/<collection>`, account the item's id, label the item's label, generic attribute
/// (`kSecAttrGeneric`) its attributes as JSON (keys sorted), description (`kSecAttrDescription`) its content type,
/// and data the secret. What `SecItemCopyMatching` returns for them is what `lactl keychain dump` prints.
struct KeychainSecrets {
    /// The keychain service of collection `name`'s items.
    static func service(_ collection: String) -> String { "org.freedesktop.Secret/" + collection }

    /// A failed keychain operation, with the keychain's status.
    struct Failure: Error, CustomStringConvertible {
        var status: OSStatus
        var operation: String
        var description: String {
            let text = SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
            return "\(operation): \(text)"
        }
        /// Whether the keychain refused the calling program (not on the item's list, and the user was not asked or
        /// said no), rather than failing.
        var isRefusal: Bool {
            [errSecAuthFailed, errSecInteractionNotAllowed, errSecUserCanceled].contains(status)
        }
    }

    /// Every item of `collection`.
    func items(_ collection: String) throws -> [StoredSecretItem] {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Self.service(collection),
            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess else { throw Failure(status: status, operation: "list the items") }
        let found = (result as? [[String: Any]]) ?? []
        return found.compactMap(Self.item(from:)).sorted { $0.id < $1.id }
    }

    /// Item `id` of `collection`, and its secret when `withSecret`; nil when there is no such item. One query.
    func item(_ collection: String, _ id: String, withSecret: Bool = false) throws -> (
        item: StoredSecretItem, secret: SecureBytes?
    )? {
        var query = Self.query(collection, id)
        query[kSecReturnAttributes as String] = true
        if withSecret { query[kSecReturnData as String] = true }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let attributes = result as? [String: Any],
            let item = Self.item(from: attributes)
        else {
            throw Failure(status: status == errSecSuccess ? errSecDecode : status, operation: "read the item")
        }
        guard withSecret else { return (item, nil) }
        guard let data = attributes[kSecValueData as String] as? Data else {
            throw Failure(status: errSecDecode, operation: "read the secret")
        }
        return (item, SecureBytes(data))
    }

    /// Adds an item; its id.
    func add(
        _ collection: String, label: String, attributes: [String: String], contentType: String, secret: SecureBytes
    ) throws -> String {
        let id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        var item = Self.query(collection, id)
        item[kSecAttrLabel as String] = label
        item[kSecAttrGeneric as String] = try Self.encoded(attributes)
        item[kSecAttrDescription as String] = contentType
        item[kSecValueData as String] = secret.withUnsafeBytes { Data($0) }
        // Trusting the calling program alone (the D-Bus client the request is made for, as localauthd identified
        // it): any other program's use of the secret asks the user.
        var access: SecAccess?
        guard SecAccessCreate(label as CFString, nil, &access) == errSecSuccess, let access else {
            throw Failure(status: errSecParam, operation: "make the item's trusted-application list")
        }
        item[kSecAttrAccess as String] = access
        let status = SecItemAdd(item as CFDictionary, nil)
        guard status == errSecSuccess else { throw Failure(status: status, operation: "add the item") }
        return id
    }

    /// Changes what is given of item `id`.
    func update(
        _ collection: String, _ id: String, label: String? = nil, attributes: [String: String]? = nil,
        contentType: String? = nil, secret: SecureBytes? = nil
    ) throws {
        var changes: [String: Any] = [:]
        if let label { changes[kSecAttrLabel as String] = label }
        if let attributes { changes[kSecAttrGeneric as String] = try Self.encoded(attributes) }
        if let contentType { changes[kSecAttrDescription as String] = contentType }
        if let secret { changes[kSecValueData as String] = secret.withUnsafeBytes { Data($0) } }
        let status = SecItemUpdate(Self.query(collection, id) as CFDictionary, changes as CFDictionary)
        guard status == errSecSuccess else { throw Failure(status: status, operation: "change the item") }
    }

    func delete(_ collection: String, _ id: String) throws {
        let status = SecItemDelete(Self.query(collection, id) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw Failure(status: status, operation: "delete the item")
        }
    }

    private static func query(_ collection: String, _ id: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service(collection),
            kSecAttrAccount as String: id,
        ]
    }

    static func encoded(_ attributes: [String: String]) throws -> Data {
        try JSONSerialization.data(withJSONObject: attributes, options: [.sortedKeys])
    }

    /// Whether `id` can be an item's name in an object path (`[A-Za-z0-9_]`, as the provider makes them): an item
    /// another program put under the service with another account is left out, not served under a path D-Bus
    /// refuses.
    static func isItemName(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 255
            && id.utf8.allSatisfy {
                ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95
            }
    }

    private static func item(from attributes: [String: Any]) -> StoredSecretItem? {
        guard let id = attributes[kSecAttrAccount as String] as? String, isItemName(id) else { return nil }
        var map: [String: String] = [:]
        if let data = attributes[kSecAttrGeneric as String] as? Data,
            let decoded = (try? JSONSerialization.jsonObject(with: data)) as? [String: String]
        {
            map = decoded
        }
        let created = (attributes[kSecAttrCreationDate as String] as? Date)?.timeIntervalSince1970 ?? 0
        let modified = (attributes[kSecAttrModificationDate as String] as? Date)?.timeIntervalSince1970 ?? created
        return StoredSecretItem(
            id: id, label: attributes[kSecAttrLabel as String] as? String ?? "", attributes: map,
            contentType: attributes[kSecAttrDescription as String] as? String ?? "text/plain",
            created: UInt64(max(0, created)), modified: UInt64(max(0, modified)))
    }
}
