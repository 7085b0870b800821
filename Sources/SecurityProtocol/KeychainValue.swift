import Foundation
import SecureCrypto

/// One attribute value of a keychain item, in the handful of types Keychain Services uses.
///
/// The public API converts Foundation values (`String`, `Data`, `NSNumber`, `Bool`, `Date`, `SecAccessControl`) into
/// these; the engine checks each against the attribute's expected type.
package enum KeychainValue: Sendable, Hashable {
    case string(String)
    case data(Data)
    case integer(Int64)
    case bool(Bool)
    case date(Date)
    case accessControl(AccessControlPolicy)
    /// A trusted-application list (`kSecAttrAccess`).
    case access(ItemAccess)
    /// An item's secret data (`kSecValueData` in an add or update), in zeroizing memory: decoded from a frame
    /// straight into it and never copied into ordinary `Data` on the way to the sealer. Not an attribute type.
    case secret(SecureBytes)

    /// The value as a string, when it is one.
    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The value as a boolean: a `Bool`, or the integers 0 and 1 (what `NSNumber` booleans decode to).
    package var boolValue: Bool? {
        switch self {
        case .bool(let value): value
        case .integer(0): false
        case .integer(1): true
        default: nil
        }
    }

    /// The value as an item's secret data: a secret, or bytes (which callers inside the engine, and tests, pass as
    /// `.data`) copied into zeroizing memory.
    package var secretValue: SecureBytes? {
        switch self {
        case .secret(let bytes): bytes
        case .data(let data): SecureBytes(data)
        default: nil
        }
    }

    /// The value as an integer: an integer, or a boolean as 0/1.
    package var integerValue: Int64? {
        switch self {
        case .integer(let value): value
        case .bool(let value): value ? 1 : 0
        default: nil
        }
    }
}

/// A stored access-control list: the protection class it names, `SecAccessControlCreateFlags` raw bits and, for
/// `.biometryCurrentSet`, the enrolled-set state hash bound when the item or key was created.
package struct AccessControlPolicy: Sendable, Hashable {
    /// The protection class (`kSecAttrAccessible…` string value, e.g. `"ak"`).
    package var protection: String
    /// `SecAccessControlCreateFlags` raw value.
    package var flags: UInt64
    /// The enrolled-set state hash bound at creation (`.biometryCurrentSet`); nil when not bound (lists made
    /// before binding existed, or not yet attached to an item). Empty when nothing was enrolled at creation.
    package var boundStateHash: Data?

    package init(protection: String, flags: UInt64, boundStateHash: Data? = nil) {
        self.protection = protection
        self.flags = flags
        self.boundStateHash = boundStateHash
    }
}

extension KeychainValue: ProtocolCodable {
    /// A variant: 1 string, 2 data, 3 integer, 4 bool, 5 date, 6 access control (the numbers the store's attribute
    /// codec uses for its tags), 7 secret, 8 access, each with its value as field 1.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .string(let value): writer.variant(1) { $0.field(1, value) }
        case .data(let value): writer.variant(2) { $0.field(1, value) }
        case .integer(let value): writer.variant(3) { $0.field(1, value) }
        case .bool(let value): writer.variant(4) { $0.field(1, value) }
        case .date(let value): writer.variant(5) { $0.field(1, value) }
        case .accessControl(let value): writer.variant(6) { $0.field(1, value) }
        case .secret(let value): writer.variant(7) { $0.field(1, value) }
        case .access(let value): writer.variant(8) { $0.field(1, value) }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .string(try payload.field(1))
            case 2: .data(try payload.field(1))
            case 3: .integer(try payload.field(1))
            case 4: .bool(try payload.field(1))
            case 5: .date(try payload.field(1))
            case 6: .accessControl(try payload.field(1))
            case 7: .secret(try payload.field(1))
            case 8: .access(try payload.field(1))
            default: nil
            }
        }
    }
}

extension AccessControlPolicy: ProtocolCodable {
    /// A record: 1 protection, 2 flags, 3 bound state hash (absent when not bound).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, protection)
        writer.field(2, flags)
        writer.optionalField(3, boundStateHash)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            protection: try reader.field(1), flags: try reader.field(2), boundStateHash: try reader.optionalField(3))
    }
}
