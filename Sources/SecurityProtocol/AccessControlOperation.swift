/// An operation on an item that its access control may guard.
package enum AccessControlOperation: Sendable, Hashable {
    /// Reading the item's data (or using a key's material).
    case readData
    /// Changing the item.
    case update
    /// Signing with a private key (`LAAccessControlOperation.useKeySign`).
    case useKeySign
    /// Decrypting with a private key (`LAAccessControlOperation.useKeyDecrypt`).
    case useKeyDecrypt
    /// Key agreement with a private key (`LAAccessControlOperation.useKeyKeyExchange`).
    case useKeyKeyExchange
}

extension AccessControlOperation: ProtocolCodable {
    /// One byte: 1 readData, 2 update, 3 useKeySign, 4 useKeyDecrypt, 5 useKeyKeyExchange.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .readData: writer.byte(1)
        case .update: writer.byte(2)
        case .useKeySign: writer.byte(3)
        case .useKeyDecrypt: writer.byte(4)
        case .useKeyKeyExchange: writer.byte(5)
        }
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        switch try reader.remainingByte(for: "an access-control operation") {
        case 1: self = .readData
        case 2: self = .update
        case 3: self = .useKeySign
        case 4: self = .useKeyDecrypt
        case 5: self = .useKeyKeyExchange
        default: throw MessageDecodingError(.invalidValue, at: start, "unknown access-control operation")
        }
    }
}
