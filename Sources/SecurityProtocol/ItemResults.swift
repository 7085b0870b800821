import Foundation
import SecureCrypto

/// The items a request returns and how the caller asked for them.
package struct ItemResults: Sendable, Equatable {
    /// The `kSecReturn…` keys that were set.
    package var returns: ReturnOptions
    /// Whether one item (not an array) was asked for.
    package var isSingle: Bool
    package var items: [ItemResult]

    /// Results with these values.
    package init(returns: ReturnOptions, isSingle: Bool, items: [ItemResult]) {
        self.returns = returns
        self.isSingle = isSingle
        self.items = items
    }
}

/// One returned item: only what the request asked for is filled in.
package struct ItemResult: Sendable, Equatable {
    package var itemClass: ItemClass
    /// The attributes, with `class`, as `kSecReturnAttributes` returns them.
    package var attributes: [String: KeychainValue]?
    package var data: SecureBytes?
    package var persistentReference: Data?
    package var reference: ItemReference?

    /// A result with these parts.
    package init(
        itemClass: ItemClass, attributes: [String: KeychainValue]? = nil, data: SecureBytes? = nil,
        persistentReference: Data? = nil, reference: ItemReference? = nil
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.data = data
        self.persistentReference = persistentReference
        self.reference = reference
    }
}

/// An item's data and attributes, for building a `SecCertificate` or `SecKey`.
package struct ItemMaterial: Sendable, Equatable {
    package var attributes: [String: KeychainValue]
    package var data: SecureBytes
    /// For an enclave key, whose data is a handle only the engine can open: its public key (`04 || X || Y`), so
    /// the client never parses the handle.
    package var enclavePublicKey: Data?

    /// Material with these attributes and data.
    package init(attributes: [String: KeychainValue], data: SecureBytes, enclavePublicKey: Data? = nil) {
        self.attributes = attributes
        self.data = data
        self.enclavePublicKey = enclavePublicKey
    }
}

/// What `kSecReturnRef` returns for each class that has references.
package enum ItemReference: Sendable, Equatable {
    case certificate(ItemMaterial)
    case key(ItemMaterial)
    case identity(certificate: ItemMaterial, privateKey: ItemMaterial)
}

extension ItemResults: ProtocolCodable {
    /// A record: 1 returns, 2 isSingle, 3 items.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, returns)
        writer.field(2, isSingle)
        writer.field(3, items)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(returns: try reader.field(1), isSingle: try reader.field(2), items: try reader.field(3))
    }
}

extension ItemResult: ProtocolCodable {
    /// A record: 1 itemClass, then the optional 2 attributes, 3 data, 4 persistentReference, 5 reference.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, itemClass)
        writer.optionalField(2, attributes)
        writer.optionalField(3, data)
        writer.optionalField(4, persistentReference)
        writer.optionalField(5, reference)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            itemClass: try reader.field(1), attributes: try reader.optionalField(2), data: try reader.optionalField(3),
            persistentReference: try reader.optionalField(4), reference: try reader.optionalField(5))
    }
}

extension ItemMaterial: ProtocolCodable {
    /// A record: 1 attributes, 2 data, 3 the enclave key's public key (optional).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, attributes)
        writer.field(2, data)
        writer.optionalField(3, enclavePublicKey)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            attributes: try reader.field(1), data: try reader.field(2), enclavePublicKey: try reader.optionalField(3))
    }
}

extension ItemReference: ProtocolCodable {
    /// A variant: 1 certificate, 2 key, 3 identity (fields 1 certificate, 2 private key).
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .certificate(let material): writer.variant(1) { $0.field(1, material) }
        case .key(let material): writer.variant(2) { $0.field(1, material) }
        case .identity(let certificate, let privateKey):
            writer.variant(3) {
                $0.field(1, certificate)
                $0.field(2, privateKey)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .certificate(try payload.field(1))
            case 2: .key(try payload.field(1))
            case 3: .identity(certificate: try payload.field(1), privateKey: try payload.field(2))
            default: nil
            }
        }
    }
}
