import Foundation
import KeychainStore
import SecureCrypto

/// One request to the engine, as the client sends it: the caller's dictionaries with values already converted to
/// `KeychainValue` (semantic checks happen in the engine).
package enum KeychainRequest: Sendable {
    case add([String: KeychainValue])
    case copyMatching([String: KeychainValue])
    case update(query: [String: KeychainValue], attributes: [String: KeychainValue])
    case delete([String: KeychainValue])
    case lock
    case lockState
    /// Writes every item the caller may see, except `*ThisDeviceOnly` ones, to `file`, sealed under `password`.
    case exportBackup(file: URL, password: SecureBytes)
    /// Adds the items of a backup file; items whose primary key exists are left as they are.
    case importBackup(file: URL, password: SecureBytes)
}

/// The engine's answer to a `KeychainRequest`.
package enum KeychainResponse: Sendable {
    case success
    /// Results of `copyMatching`, or of `add` with return keys.
    case items(ItemResults)
    case locked(Bool)
    /// Items written to or added from a backup, and items skipped (already present, or device-only).
    case backup(count: Int, skipped: Int)
}

/// The items a request returns and how the caller asked for them.
package struct ItemResults: Sendable {
    /// The `kSecReturn…` keys that were set.
    package var returns: ReturnOptions
    /// Whether one item (not an array) was asked for.
    package var isSingle: Bool
    package var items: [ItemResult]
}

/// One returned item: only what the request asked for is filled in.
package struct ItemResult: Sendable {
    package var itemClass: ItemClass
    /// The attributes, with `class`, as `kSecReturnAttributes` returns them.
    package var attributes: [String: KeychainValue]?
    package var data: SecureBytes?
    package var persistentReference: Data?
    package var reference: ItemReference?
}

/// An item's data and attributes, for building a `SecCertificate` or `SecKey`.
package struct ItemMaterial: Sendable {
    package var attributes: [String: KeychainValue]
    package var data: SecureBytes
}

/// What `kSecReturnRef` returns for each class that has references.
package enum ItemReference: Sendable {
    case certificate(ItemMaterial)
    case key(ItemMaterial)
    case identity(certificate: ItemMaterial, privateKey: ItemMaterial)
}

/// Something that happened to the keychain, for observers.
package struct EngineEvent: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        case added, updated, deleted, locked, unlocked
    }

    package var kind: Kind
    /// The item's class (nil for lock and unlock).
    package var itemClass: ItemClass?
    /// The item's access group (nil for lock and unlock).
    package var accessGroup: String?
    /// The item's persistent reference (nil for lock and unlock).
    package var persistentReference: Data?

    package init(kind: Kind, itemClass: ItemClass? = nil, accessGroup: String? = nil, persistentReference: Data? = nil) {
        self.kind = kind
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.persistentReference = persistentReference
    }
}
