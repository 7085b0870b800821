import Foundation

/// One keychain row as stored: clear columns needed to filter before decrypting, and three ciphertexts.
///
/// `attributes` is sealed with the metadata key, `wrappedKey` is the per-row key sealed with the item's
/// protection-class key, `value` is the item's data sealed with the per-row key. The engine binds all three to the
/// row (its id and clear columns) through associated data; this type only carries bytes.
package struct StoredItem: Sendable, Equatable {
    package var rowID: Int64
    package var itemClass: String
    package var accessGroup: String
    package var protectionClass: String
    package var synchronizable: Bool
    /// HMAC-SHA256(index key, canonical primary key + access group + synchronizable).
    package var blindIndex: Data
    package var attributes: Data
    package var wrappedKey: Data
    /// Whether the item has an access-control list; nil for rows written before the column existed.
    package var hasAccessControl: Bool?
    /// How many times the row was sealed (1 when added, raised by every update); bound into every part's
    /// associated data, so no part of an earlier version fits the current one. Nil for rows sealed before it.
    package var generation: Int64?
    /// The sealed value; `nil` when the row was read without it (scans skip the possibly large value column).
    package var value: Data?

    package init(
        rowID: Int64, itemClass: String, accessGroup: String, protectionClass: String, synchronizable: Bool,
        blindIndex: Data, attributes: Data, wrappedKey: Data, hasAccessControl: Bool? = nil, generation: Int64? = nil,
        value: Data?
    ) {
        self.rowID = rowID
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.protectionClass = protectionClass
        self.synchronizable = synchronizable
        self.blindIndex = blindIndex
        self.attributes = attributes
        self.wrappedKey = wrappedKey
        self.hasAccessControl = hasAccessControl
        self.generation = generation
        self.value = value
    }
}
