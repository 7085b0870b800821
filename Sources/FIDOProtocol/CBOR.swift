/// A CBOR data item (RFC 8949) of the kinds CTAP 2.1 uses (§8 "Message Encoding"): integers, byte and text strings,
/// arrays, maps, booleans, null and undefined. Floating-point numbers, tags and indefinite lengths are not CTAP's:
/// the decoder refuses them.
///
/// A map keeps its pairs in the order decoded; ``encoded()`` writes every map in CTAP2's canonical order (keys by
/// major type, then shorter encodings first, then bytewise), so what this side sends is what a verifier recomputes
/// (the authenticator data's extensions, COSE keys).
package indirect enum CBOR: Hashable, Sendable {
    case unsigned(UInt64)
    /// The negative integer -1 - n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    case map([Pair])
    case bool(Bool)
    case null
    case undefined

    /// One key and its value in a map.
    package struct Pair: Hashable, Sendable {
        package var key: CBOR
        package var value: CBOR

        package init(_ key: CBOR, _ value: CBOR) {
            self.key = key
            self.value = value
        }
    }

    /// An integer, as CBOR writes it (unsigned from 0 up, negative below).
    package static func int(_ value: Int64) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// A map from pairs written in any order (``encoded()`` sorts them).
    package static func map(_ pairs: KeyValuePairs<CBOR, CBOR>) -> CBOR {
        .map(pairs.map { Pair($0.key, $0.value) })
    }

    /// The value of `key` in a map; nil for another kind or when absent.
    package subscript(key: CBOR) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.key == key }?.value
    }

    /// The value of the integer key `key` in a map (CTAP's parameters are numbered).
    package subscript(key: Int64) -> CBOR? { self[.int(key)] }

    /// The value of the text key `key` in a map.
    package subscript(key: String) -> CBOR? { self[.text(key)] }

    /// The integer, when it fits in an `Int64`.
    package var intValue: Int64? {
        switch self {
        case .unsigned(let value): value <= UInt64(Int64.max) ? Int64(value) : nil
        case .negative(let value): value <= UInt64(Int64.max) ? -1 - Int64(value) : nil
        default: nil
        }
    }

    package var bytesValue: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    package var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var arrayValue: [CBOR]? {
        if case .array(let items) = self { return items }
        return nil
    }

    package var mapValue: [Pair]? {
        if case .map(let pairs) = self { return pairs }
        return nil
    }
}

// MARK: - Encoding

extension CBOR {
    /// The item's canonical CTAP2 encoding: shortest heads, definite lengths, map keys in length-first order.
    package func encoded() -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let value): Self.head(0, value, into: &out)
        case .negative(let value): Self.head(1, value, into: &out)
        case .bytes(let bytes):
            Self.head(2, UInt64(bytes.count), into: &out)
            out += bytes
        case .text(let text):
            let utf8 = Array(text.utf8)
            Self.head(3, UInt64(utf8.count), into: &out)
            out += utf8
        case .array(let items):
            Self.head(4, UInt64(items.count), into: &out)
            for item in items { item.encode(into: &out) }
        case .map(let pairs):
            Self.head(5, UInt64(pairs.count), into: &out)
            let sorted = pairs.map { (key: $0.key.encoded(), value: $0.value) }.sorted { Self.precedes($0.key, $1.key) }
            for pair in sorted {
                out += pair.key
                pair.value.encode(into: &out)
            }
        case .bool(let value): out.append(value ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        case .undefined: out.append(0xF7)
        }
    }

    /// CTAP2's canonical order of two encoded map keys (CTAP 2.1 §8.1): the lower major type first, then the
    /// shorter encoding, then the lower bytes (so 10, 100, -1, "z", "aa", false).
    private static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let (majorA, majorB) = (a[0] >> 5, b[0] >> 5)
        if majorA != majorB { return majorA < majorB }
        if a.count != b.count { return a.count < b.count }
        return a.lexicographicallyPrecedes(b)
    }

    /// A head: the major type and the shortest argument encoding for `value`.
    private static func head(_ major: UInt8, _ value: UInt64, into out: inout [UInt8]) {
        let type = major << 5
        switch value {
        case 0..<24: out.append(type | UInt8(value))
        case 24...0xFF: out += [type | 24, UInt8(value)]
        case 0x100...0xFFFF: out += [type | 25, UInt8(value >> 8), UInt8(value & 0xFF)]
        case 0x1_0000...0xFFFF_FFFF: out += [type | 26] + (0..<4).reversed().map { UInt8((value >> ($0 * 8)) & 0xFF) }
        default: out += [type | 27] + (0..<8).reversed().map { UInt8((value >> ($0 * 8)) & 0xFF) }
        }
    }
}

// MARK: - Decoding

/// Why bytes are not a CTAP CBOR item (CTAP2_ERR_INVALID_CBOR, or CTAP1_ERR_INVALID_LENGTH when truncated).
package enum CBORError: Error, Equatable, Sendable {
    /// The input ends inside an item.
    case truncated
    /// Bytes follow the item.
    case trailingBytes
    /// A float, a tag, an indefinite length, a reserved or unassigned simple value.
    case unsupported(UInt8)
    /// A text string that is not UTF-8.
    case invalidText
    /// A map with a key twice.
    case duplicateKey
    /// Nesting deeper than ``CBOR/maximumDepth``.
    case tooDeep
    /// A length longer than the input could hold.
    case lengthTooLarge
}

extension CBOR {
    /// How deep arrays and maps may nest in a decoded item. CTAP 2.1 messages nest at most 4 deep (§8); a little more
    /// is allowed, and nothing recursive goes deeper, whatever a client sends.
    package static let maximumDepth = 8

    /// Decodes exactly one item from `bytes`.
    ///
    /// - Throws: ``CBORError`` for anything else.
    package init(decoding bytes: [UInt8]) throws {
        var reader = Reader(bytes: bytes)
        self = try reader.item(depth: 0)
        guard reader.offset == bytes.count else { throw CBORError.trailingBytes }
    }

    /// Decodes the first item of `bytes`; the item and how many bytes it took (CTAP's responses to some commands
    /// carry data after it, as the authenticator data does after its attested credential's key).
    package static func decodePrefix(_ bytes: ArraySlice<UInt8>) throws -> (item: CBOR, count: Int) {
        var reader = Reader(bytes: Array(bytes))
        let item = try reader.item(depth: 0)
        return (item, reader.offset)
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        mutating func byte() throws -> UInt8 {
            guard offset < bytes.count else { throw CBORError.truncated }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func take(_ count: UInt64) throws -> [UInt8] {
            guard count <= UInt64(bytes.count - offset) else {
                throw count > UInt64(Int32.max) ? CBORError.lengthTooLarge : CBORError.truncated
            }
            defer { offset += Int(count) }
            return Array(bytes[offset..<offset + Int(count)])
        }

        /// The argument of a head whose low five bits are `info`.
        mutating func argument(_ info: UInt8, initial: UInt8) throws -> UInt64 {
            switch info {
            case 0..<24: return UInt64(info)
            case 24: return UInt64(try byte())
            case 25: return try take(2).reduce(0) { $0 << 8 | UInt64($1) }
            case 26: return try take(4).reduce(0) { $0 << 8 | UInt64($1) }
            case 27: return try take(8).reduce(0) { $0 << 8 | UInt64($1) }
            default: throw CBORError.unsupported(initial)  // 28–30 reserved, 31 indefinite length
            }
        }

        mutating func item(depth: Int) throws -> CBOR {
            let initial = try byte()
            let major = initial >> 5
            let info = initial & 0x1F
            if major == 7 {
                switch info {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                case 23: return .undefined
                default: throw CBORError.unsupported(initial)  // other simple values, floats, break
                }
            }
            let argument = try argument(info, initial: initial)
            switch major {
            case 0: return .unsigned(argument)
            case 1: return .negative(argument)
            case 2: return .bytes(try take(argument))
            case 3:
                guard let text = String(validating: try take(argument), as: UTF8.self) else {
                    throw CBORError.invalidText
                }
                return .text(text)
            case 4:
                guard depth < CBOR.maximumDepth else { throw CBORError.tooDeep }
                // Every item takes at least one byte: a count beyond what is left cannot be met.
                guard argument <= UInt64(bytes.count - offset) else { throw CBORError.lengthTooLarge }
                var items: [CBOR] = []
                items.reserveCapacity(Int(argument))
                for _ in 0..<argument { items.append(try item(depth: depth + 1)) }
                return .array(items)
            case 5:
                guard depth < CBOR.maximumDepth else { throw CBORError.tooDeep }
                guard argument <= UInt64(bytes.count - offset) / 2 else { throw CBORError.lengthTooLarge }
                var pairs: [Pair] = []
                var keys = Set<CBOR>()
                pairs.reserveCapacity(Int(argument))
                for _ in 0..<argument {
                    let key = try item(depth: depth + 1)
                    guard keys.insert(key).inserted else { throw CBORError.duplicateKey }
                    pairs.append(Pair(key, try item(depth: depth + 1)))
                }
                return .map(pairs)
            default: throw CBORError.unsupported(initial)  // 6: tags
            }
        }
    }
}
