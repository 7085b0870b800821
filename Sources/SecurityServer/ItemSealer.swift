import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// Turns an item (attributes and data) into a `StoredItem` and back, with the two AES-256-GCM layers: attributes
/// under the metadata key, data under a fresh per-row key that the item's class key wraps.
///
/// Every ciphertext's associated data names its part and the row (id, class, access group, protection class,
/// synchronizable, blind index, generation), so a ciphertext changed, or moved or copied into another row, fails to
/// open; the generation (raised by every write of the row) and, in the wrapped key's and the value's, the hash of
/// the item's access-control list make every part fit only the other parts of the same version: an earlier
/// attributes blob (with an earlier, weaker list) spliced back beside the current value fails to open.
struct ItemSealer: Sendable {
    let enclave: Enclave

    /// A decrypted row's attributes and what the engine needs to act on it.
    struct OpenedItem {
        var row: StoredItem
        var itemClass: ItemClass
        var protectionClass: ProtectionClass
        /// Everything stored: user attributes, primary-key defaults, `agrp`, `pdmn`, `sync`, `cdat`, `mdat`, `accc`,
        /// `acls`.
        var attributes: [String: KeychainValue]

        /// False when the attributes were left sealed (a lookup that needs none of them); `attributes` is empty then.
        var attributesOpened = true

        var accessControl: AccessControlPolicy? {
            if case .accessControl(let policy) = attributes[ItemKey.accessControl] { return policy }
            return nil
        }
    }

    /// HMAC-SHA256(index key, class, access group, synchronizable, primary key values in schema order).
    func blindIndex(
        itemClass: ItemClass, accessGroup: String, synchronizable: Bool, attributes: [String: KeychainValue]
    ) -> Data {
        var index = Data(count: HMACSHA256.byteCount)
        index.withUnsafeMutableBytes {
            blindIndex(
                itemClass: itemClass, accessGroup: accessGroup, synchronizable: synchronizable,
                value: { attributes[$1] },
                into: $0)
        }
        return index
    }

    /// Writes the blind index into `index` (``HMACSHA256/byteCount`` bytes), with each primary-key attribute's
    /// (normalized) value from `value` (given its position in the class's primary key and its name), its default
    /// when that gives none.
    func blindIndex(
        itemClass: ItemClass, accessGroup: String, synchronizable: Bool, value: (Int, String) -> KeychainValue?,
        into index: UnsafeMutableRawBufferPointer
    ) {
        var out = MessageWriter()
        out.string("la.index.v1")
        out.string(itemClass.rawValue)
        out.string(accessGroup)
        out.byte(synchronizable ? 1 : 0)
        for (position, key) in AttributeSchema.primaryKey(of: itemClass).enumerated() {
            out.string(key)
            let value =
                value(position, key)
                ?? AttributeSchema.defaultValue(for: AttributeSchema.attributes(of: itemClass)[key]!)
            AttributeCodec.encode(AttributeSchema.indexForm(value), into: &out)
        }
        out.withUnsafeBytes { enclave.indexMAC.authenticationCode(for: $0, into: index) }
    }

    /// The clear columns of a row that its parts' associated data names, read where they lie (and bound to them).
    struct ClearColumns: ~Escapable {
        var rowID: Int64
        var itemClass: RawSpan
        var accessGroup: RawSpan
        var protectionClass: RawSpan
        var synchronizable: Bool
        var blindIndex: RawSpan
        var hasAccessControl: Bool?
        var generation: Int64?

        @_lifetime(copy itemClass, copy accessGroup, copy protectionClass, copy blindIndex)
        init(
            rowID: Int64, itemClass: RawSpan, accessGroup: RawSpan, protectionClass: RawSpan, synchronizable: Bool,
            blindIndex: RawSpan, hasAccessControl: Bool?, generation: Int64?
        ) {
            self.rowID = rowID
            self.itemClass = itemClass
            self.accessGroup = accessGroup
            self.protectionClass = protectionClass
            self.synchronizable = synchronizable
            self.blindIndex = blindIndex
            self.hasAccessControl = hasAccessControl
            self.generation = generation
        }

        /// The columns of a row read in place.
        @_lifetime(copy row)
        init(_ row: borrowing DirectRow) {
            self.init(
                rowID: row.rowID, itemClass: row.itemClass, accessGroup: row.accessGroup,
                protectionClass: row.protectionClass, synchronizable: row.synchronizable, blindIndex: row.blindIndex,
                hasAccessControl: row.hasAccessControl, generation: row.generation)
        }
    }

    /// The associated data of one part of `row`.
    private func binding(_ part: UInt8, _ row: StoredItem, accessControl: AccessControlPolicy?) -> Data {
        Self.withClearColumns(row) { columns in
            var out = MessageWriter()
            Self.writeBinding(part, columns, accessControl: accessControl, into: &out)
            return out.data
        }
    }

    /// What `body` makes of `row`'s clear columns.
    private static func withClearColumns<Result>(
        _ row: StoredItem, _ body: (borrowing ClearColumns) throws -> Result
    ) rethrows -> Result {
        var (itemClass, accessGroup, protectionClass) = (row.itemClass, row.accessGroup, row.protectionClass)
        return try itemClass.withUTF8 { itemClass in
            try accessGroup.withUTF8 { accessGroup in
                try protectionClass.withUTF8 { protectionClass in
                    try row.blindIndex.withUnsafeBytes { blindIndex in
                        try body(
                            ClearColumns(
                                rowID: row.rowID, itemClass: RawSpan(_unsafeElements: itemClass),
                                accessGroup: RawSpan(_unsafeElements: accessGroup),
                                protectionClass: RawSpan(_unsafeElements: protectionClass),
                                synchronizable: row.synchronizable, blindIndex: RawSpan(_unsafeBytes: blindIndex),
                                hasAccessControl: row.hasAccessControl, generation: row.generation))
                    }
                }
            }
        }
    }

    /// Writes the associated data of one part of a row: the part's name, then the row's id and clear columns, and,
    /// for rows sealed with a generation, the generation and (for the key and the value) the list's hash.
    private static func writeBinding(
        _ part: UInt8, _ row: borrowing ClearColumns, accessControl: AccessControlPolicy?, into out: inout MessageWriter
    ) {
        out.string(Self.bindingLabel)
        out.byte(part)
        out.uint64(UInt64(bitPattern: row.rowID))
        out.bytes(row.itemClass)
        out.bytes(row.accessGroup)
        out.bytes(row.protectionClass)
        out.byte(row.synchronizable ? 1 : 0)
        out.bytes(row.blindIndex)
        // Rows from before the access-control column bind nothing for it; newer rows bind its value, so changing
        // the column in either direction makes every part of the row fail to open.
        if let hasAccessControl = row.hasAccessControl { out.byte(hasAccessControl ? 2 : 1) }
        // Likewise the generation: a row sealed with one never opens with the column cleared or changed.
        if let generation = row.generation {
            out.byte(3)
            out.uint64(UInt64(bitPattern: generation))
            if part != Part.attributes {
                if let accessControl {
                    out.byte(1)
                    out.bytes(SHA256.hash(KeychainEngine.encodedAccessControl(accessControl)))
                } else {
                    out.byte(0)
                }
            }
        }
    }

    /// What every binding starts with, length-prefixed; the part's byte follows it.
    private static let bindingLabel = "la.item.v1"
    private static let partOffset = 4 + bindingLabel.utf8.count

    /// The three parts a row seals, each bound separately.
    private enum Part {
        static let attributes: UInt8 = 1
        static let key: UInt8 = 2
        static let value: UInt8 = 3
    }

    /// Seals `attributes` and `data` into the row whose clear columns `row` carries.
    func seal(
        _ row: StoredItem, attributes: [String: KeychainValue], data: SecureBytes, protectionClass: ProtectionClass
    ) throws -> StoredItem {
        var sealed = row
        // The column says whether any guard is due: an access-control list or a trusted-application list.
        sealed.hasAccessControl = attributes[ItemKey.accessControl] != nil || attributes["acls"] != nil
        // The column is the file's: a writer of it could set the largest value, so no trapping arithmetic.
        let (generation, overflow) = (row.generation ?? 0).addingReportingOverflow(1)
        guard !overflow, generation > 0 else { throw KeychainStatus(.decode, "a row's generation is out of range") }
        sealed.generation = generation
        var accessControl: AccessControlPolicy?
        if case .accessControl(let policy) = attributes[ItemKey.accessControl] { accessControl = policy }
        let rowKey = try SecureBytes(randomCount: 32)
        sealed.wrappedKey = try enclave.wrap(
            rowKey: rowKey, protectionClass: protectionClass,
            binding: binding(Part.key, sealed, accessControl: accessControl))
        sealed.attributes = try AESGCM.seal(
            AttributeCodec.encode(attributes), using: enclave.metadataKey,
            authenticating: binding(Part.attributes, sealed, accessControl: accessControl)
        ).combined
        sealed.value = try AESGCM.seal(
            data, using: rowKey, authenticating: binding(Part.value, sealed, accessControl: accessControl)
        ).combined
        return sealed
    }

    /// Opens a row's attributes. - Throws: `errSecDecode` when they do not authenticate for this row.
    func open(_ row: StoredItem) throws -> OpenedItem {
        guard let itemClass = ItemClass(rawValue: row.itemClass),
            let protectionClass = ProtectionClass(rawValue: row.protectionClass)
        else { throw KeychainStatus(.decode, "a row names an unknown class") }
        let attributes: [String: KeychainValue]
        do {
            let plaintext = try AESGCM.open(
                AESGCM.SealedBox(combined: row.attributes), using: enclave.metadataKey,
                authenticating: binding(Part.attributes, row, accessControl: nil))
            attributes = try plaintext.withUnsafeBytes { try AttributeCodec.decode($0) }
        } catch {
            throw KeychainStatus(.decode, "an item's attributes do not authenticate")
        }
        return OpenedItem(row: row, itemClass: itemClass, protectionClass: protectionClass, attributes: attributes)
    }

    /// A row whose attributes stay sealed: for lookups by full primary key that return only data or a persistent
    /// reference, of rows known to have neither an access-control nor a trusted-application list. Its data still opens only for this row.
    func unopened(_ row: StoredItem) throws -> OpenedItem {
        guard let itemClass = ItemClass(rawValue: row.itemClass),
            let protectionClass = ProtectionClass(rawValue: row.protectionClass)
        else { throw KeychainStatus(.decode, "a row names an unknown class") }
        return OpenedItem(
            row: row, itemClass: itemClass, protectionClass: protectionClass, attributes: [:], attributesOpened: false)
    }

    /// Opens a row's data from its sealed value.
    ///
    /// - Throws: `errSecInteractionNotAllowed` when the class key is locked away, `errSecDecode` when the wrapped
    ///   key or the value does not authenticate for this row.
    func openData(_ item: OpenedItem, sealedValue: Data) throws -> SecureBytes {
        // An unopened row is one known (from its authenticated clear column) to have no list.
        try Self.withClearColumns(item.row) { columns in
            try openData(
                columns, wrappedKey: item.row.wrappedKey.bytes, sealedValue: sealedValue.bytes,
                protectionClass: item.protectionClass, accessControl: item.accessControl)
        }
    }

    /// Opens the data of a row read in place, which its authenticated clear column says has no list (the hot path:
    /// nothing of the row is copied).
    ///
    /// - Throws: as ``openData(_:sealedValue:)``; `errSecItemNotFound` when the row was read without its value.
    func openData(_ row: borrowing DirectRow, protectionClass: ProtectionClass) throws -> SecureBytes {
        guard let sealedValue = row.value else { throw KeychainStatus(.itemNotFound, "the item's value was not read") }
        return try openData(
            ClearColumns(row), wrappedKey: row.wrappedKey, sealedValue: sealedValue, protectionClass: protectionClass,
            accessControl: nil)
    }

    private func openData(
        _ columns: borrowing ClearColumns, wrappedKey: RawSpan, sealedValue: RawSpan,
        protectionClass: ProtectionClass, accessControl: AccessControlPolicy?
    ) throws -> SecureBytes {
        // The key's and the value's associated data differ only in the part's byte: built once, then changed.
        var associatedData = MessageWriter()
        Self.writeBinding(Part.key, columns, accessControl: accessControl, into: &associatedData)
        let rowKey = try wrappedKey.withUnsafeBytes { wrappedKey in
            try associatedData.withUnsafeBytes {
                try enclave.unwrap(rowKey: wrappedKey, protectionClass: protectionClass, binding: $0)
            }
        }
        associatedData.replaceByte(at: Self.partOffset, with: Part.value)
        do {
            return try sealedValue.withUnsafeBytes { sealedValue in
                try associatedData.withUnsafeBytes {
                    try AESGCM.open(combined: sealedValue, using: rowKey, authenticating: $0)
                }
            }
        } catch {
            throw KeychainStatus(.decode, "an item's data does not authenticate")
        }
    }
}
