import Foundation

/// Something that happened to the keychain, for observers.
package struct EngineEvent: Sendable, Equatable {
    /// What happened.
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

    package init(kind: Kind, itemClass: ItemClass? = nil, accessGroup: String? = nil, persistentReference: Data? = nil)
    {
        self.kind = kind
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.persistentReference = persistentReference
    }
}

extension EngineEvent: ProtocolCodable {
    /// A record: 1 kind, then the optional 2 itemClass, 3 accessGroup, 4 persistentReference.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, kind)
        writer.optionalField(2, itemClass)
        writer.optionalField(3, accessGroup)
        writer.optionalField(4, persistentReference)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            kind: try reader.field(1), itemClass: try reader.optionalField(2), accessGroup: try reader.optionalField(3),
            persistentReference: try reader.optionalField(4))
    }
}

extension EngineEvent.Kind: ProtocolCodable {
    /// One byte: 1 added, 2 updated, 3 deleted, 4 locked, 5 unlocked.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .added: writer.byte(1)
        case .updated: writer.byte(2)
        case .deleted: writer.byte(3)
        case .locked: writer.byte(4)
        case .unlocked: writer.byte(5)
        }
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        switch try reader.remainingByte(for: "an event kind") {
        case 1: self = .added
        case 2: self = .updated
        case 3: self = .deleted
        case 4: self = .locked
        case 5: self = .unlocked
        default: throw MessageDecodingError(.invalidValue, at: start, "unknown event kind")
        }
    }
}
