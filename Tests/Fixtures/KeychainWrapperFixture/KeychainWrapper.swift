import Foundation
import KeychainServices

// A keychain wrapper shaped like the popular open-source ones (a `Keychain` type and a `KeychainError` enum of
// its own, written against Apple's `Security` with `import Security` replaced by `import KeychainServices`). It
// compiles only while KeychainServices exports Apple's names alone: a `Keychain` or `KeychainError` there would
// make the unqualified names below ambiguous.

/// The wrapper's own error type, as such wrappers declare it.
public enum KeychainError: Error, Equatable {
    case unhandled(OSStatus)
    case unexpectedData
}

/// The wrapper's own keychain type.
public struct Keychain: Sendable {
    /// The service the wrapper's items are stored under.
    public let service: String

    /// A wrapper for `service`.
    public init(service: String) { self.service = service }

    /// Stores `value` under `key`, replacing what was there.
    public func set(_ value: String, key: String) throws {
        let query: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service as AnyObject,
            kSecAttrAccount as String: key as AnyObject,
        ]
        let status = SecItemCopyMatching(query as CFDictionary, nil)
        switch status {
        case errSecSuccess:
            let update: [String: AnyObject] = [kSecValueData as String: Data(value.utf8) as AnyObject]
            let updated = SecItemUpdate(query as CFDictionary, update as CFDictionary)
            guard updated == noErr else { throw KeychainError.unhandled(updated) }
        case errSecItemNotFound:
            var add = query
            add[kSecValueData as String] = Data(value.utf8) as AnyObject
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
            let added = SecItemAdd(add as CFDictionary, nil)
            guard added == noErr else { throw KeychainError.unhandled(added) }
        default:
            throw KeychainError.unhandled(status)
        }
    }

    /// The value under `key`, or nil.
    public func get(_ key: String) throws -> String? {
        let query: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service as AnyObject,
            kSecAttrAccount as String: key as AnyObject,
            kSecMatchLimit as String: kSecMatchLimitOne,
            kSecReturnData as String: kCFBooleanTrue,
        ]
        var result: AnyObject?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainError.unhandled(status) }
        guard let data = result as? Data, let text = String(data: data, encoding: .utf8) else {
            throw KeychainError.unexpectedData
        }
        return text
    }

    /// Removes the value under `key`, if any.
    public func remove(_ key: String) throws {
        let query: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service as AnyObject,
            kSecAttrAccount as String: key as AnyObject,
        ]
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError.unhandled(status) }
    }
}
