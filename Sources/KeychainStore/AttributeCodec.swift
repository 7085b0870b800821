import Foundation
import SecurityProtocol

/// A compact, canonical binary encoding of an attribute dictionary: the store's on-disk format.
///
/// Keys are sorted, so equal dictionaries encode to equal bytes. Layout: a version byte, the entry count, then per
/// entry the key, a type tag and the value, every variable-length field preceded by its 32-bit big-endian length.
/// Written and read with SecurityProtocol's `MessageWriter` and `MessageReader` primitives, but frozen: it is not
/// the protocol's tag-length-value layout, and existing stores depend on every byte of it.
package enum AttributeCodec {
    private static let version: UInt8 = 1

    private enum Tag: UInt8 {
        case string = 1, data = 2, integer = 3, bool = 4, date = 5, accessControl = 6
        /// An access-control list with a bound enrolled-set hash; lists without one keep tag 6, so older rows and
        /// unbound lists encode exactly as before.
        case boundAccessControl = 7
        /// A trusted-application list: its descriptor, then per program its application identifier, path and
        /// code digest, after a 32-bit count.
        case access = 8
    }

    /// Encodes `attributes` canonically.
    package static func encode(_ attributes: [String: KeychainValue]) -> Data {
        var out = MessageWriter()
        out.byte(version)
        out.uint32(UInt32(attributes.count))
        for key in attributes.keys.sorted() {
            out.string(key)
            encode(attributes[key]!, into: &out)
        }
        return out.data
    }

    /// Encodes one value with its type tag (also used for blind-index input).
    package static func encode(_ value: KeychainValue, into out: inout MessageWriter) {
        switch value {
        case .string(let s):
            out.byte(Tag.string.rawValue)
            out.string(s)
        case .data(let d):
            out.byte(Tag.data.rawValue)
            out.bytes(d)
        case .secret(let bytes):
            // Item data is never an attribute (the engine takes it out of the dictionary); kept as data if it were.
            out.byte(Tag.data.rawValue)
            bytes.withUnsafeBytes { out.bytes($0) }
        case .integer(let i):
            out.byte(Tag.integer.rawValue)
            out.uint64(UInt64(bitPattern: i))
        case .bool(let b):
            out.byte(Tag.bool.rawValue)
            out.byte(b ? 1 : 0)
        case .date(let date):
            out.byte(Tag.date.rawValue)
            out.uint64(date.timeIntervalSinceReferenceDate.bitPattern)
        case .accessControl(let policy):
            out.byte((policy.boundStateHash == nil ? Tag.accessControl : Tag.boundAccessControl).rawValue)
            out.string(policy.protection)
            out.uint64(policy.flags)
            if let hash = policy.boundStateHash { out.bytes(hash) }
        case .access(let access):
            out.byte(Tag.access.rawValue)
            out.string(access.descriptor)
            out.uint32(UInt32(access.applications.count))
            for application in access.applications {
                out.string(application.applicationIdentifier)
                out.string(application.executable)
                out.bytes(application.codeDigest)
            }
        }
    }

    /// Decodes what `encode` produced. - Throws: `StoreError.corrupt` for anything malformed.
    package static func decode(_ data: some DataProtocol) throws -> [String: KeychainValue] {
        if let contiguous = data as? Data {
            return try contiguous.withUnsafeBytes { try decode($0) }
        }
        return try Data(data).withUnsafeBytes { try decode($0) }
    }

    /// Decodes what `encode` produced, straight from memory (for example a decrypted `SecureBytes`).
    package static func decode(_ buffer: UnsafeRawBufferPointer) throws -> [String: KeychainValue] {
        do {
            return try MessageReader.read(buffer, limits: limits) { reader in
                guard try reader.byte() == version else { throw StoreError(.corrupt, "unknown attribute encoding") }
                let count = try reader.uint32()
                var result: [String: KeychainValue] = [:]
                result.reserveCapacity(Int(min(count, 1024)))
                for _ in 0..<count {
                    let key = try reader.string()
                    result[key] = try decodeValue(&reader)
                }
                return result
            }
        } catch let failure as MessageDecodingError {
            throw StoreError(.corrupt, "malformed attributes: \(failure.message)")
        }
    }

    /// Records come from the store's own sealed rows, whatever their size.
    private static let limits = MessageLimits(
        maximumFrameByteCount: .max, maximumDepth: 1, maximumElementCount: .max)

    private static func decodeValue(_ reader: inout MessageReader) throws -> KeychainValue {
        guard let tag = Tag(rawValue: try reader.byte()) else { throw StoreError(.corrupt, "unknown value tag") }
        switch tag {
        case .string: return .string(try reader.string())
        case .data: return .data(try reader.data())
        case .integer: return .integer(Int64(bitPattern: try reader.uint64()))
        case .bool: return .bool(try reader.byte() != 0)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.uint64())))
        case .accessControl:
            let protection = try reader.string()
            return .accessControl(AccessControlPolicy(protection: protection, flags: try reader.uint64()))
        case .boundAccessControl:
            let protection = try reader.string()
            let flags = try reader.uint64()
            return .accessControl(
                AccessControlPolicy(protection: protection, flags: flags, boundStateHash: try reader.data()))
        case .access:
            let descriptor = try reader.string()
            let count = try reader.uint32()
            guard count <= ItemAccess.maximumApplications else {
                throw StoreError(.corrupt, "too many trusted applications")
            }
            var applications: [TrustedApplication] = []
            for _ in 0..<count {
                applications.append(
                    TrustedApplication(
                        applicationIdentifier: try reader.string(), executable: try reader.string(),
                        codeDigest: try reader.data()))
            }
            return .access(ItemAccess(descriptor: descriptor, applications: applications))
        }
    }
}
