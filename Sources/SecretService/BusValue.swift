import CGio
import CSecretBus
import Foundation

/// A D-Bus value as the provider reads and writes it: the types the Secret Service API uses.
indirect enum BusValue: Equatable {
    case string(String)
    case objectPath(String)
    case boolean(Bool)
    case uint32(UInt32)
    case uint64(UInt64)
    case bytes([UInt8])
    /// An array of `elementType` (a D-Bus type string, needed when it is empty).
    case array(elementType: String, [BusValue])
    /// `a{kv}`, in order.
    case dictionary(keyType: String, valueType: String, [BusValue], [BusValue])
    case tuple([BusValue])
    case variant(BusValue)

    /// The D-Bus type string.
    var type: String {
        switch self {
        case .string: "s"
        case .objectPath: "o"
        case .boolean: "b"
        case .uint32: "u"
        case .uint64: "t"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _, _): "a{" + key + value + "}"
        case .tuple(let members): "(" + members.map(\.type).joined() + ")"
        case .variant: "v"
        }
    }

    /// `a{ss}` from a Swift dictionary, sorted by key.
    static func stringMap(_ map: [String: String]) -> BusValue {
        let keys = map.keys.sorted()
        return .dictionary(keyType: "s", valueType: "s", keys.map { .string($0) }, keys.map { .string(map[$0]!) })
    }

    /// `ao`.
    static func paths(_ paths: [String]) -> BusValue {
        .array(elementType: "o", paths.map { .objectPath($0) })
    }

    /// A new floating GVariant of this value.
    func gvariant() -> OpaquePointer {
        switch self {
        case .string(let text): return g_variant_new_string(text)
        case .objectPath(let path): return g_variant_new_object_path(path)
        case .boolean(let value): return g_variant_new_boolean(value ? 1 : 0)
        case .uint32(let value): return g_variant_new_uint32(value)
        case .uint64(let value): return g_variant_new_uint64(guint64(value))
        case .bytes(let bytes):
            return bytes.withUnsafeBufferPointer {
                g_variant_new_fixed_array(la_variant_type("y"), $0.baseAddress, gsize($0.count), 1)
            }
        case .array(let element, let members):
            var children: [OpaquePointer?] = members.map { $0.gvariant() }
            return children.withUnsafeMutableBufferPointer {
                g_variant_new_array(la_variant_type(element), $0.baseAddress, gsize($0.count))
            }
        case .dictionary(let key, let value, let keys, let values):
            var entries: [OpaquePointer?] = zip(keys, values).map {
                g_variant_new_dict_entry($0.gvariant(), $1.gvariant())
            }
            return entries.withUnsafeMutableBufferPointer {
                g_variant_new_array(la_variant_type("{" + key + value + "}"), $0.baseAddress, gsize($0.count))
            }
        case .tuple(let members):
            var children: [OpaquePointer?] = members.map { $0.gvariant() }
            return children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        case .variant(let inner): return g_variant_new_variant(inner.gvariant())
        }
    }

    /// The value of `variant` (not consumed); nil for a type the provider never reads.
    init?(_ variant: OpaquePointer) {
        let type = String(cString: g_variant_get_type_string(variant))
        switch type {
        case "s":
            self = .string(String(cString: g_variant_get_string(variant, nil)))
        case "o":
            self = .objectPath(String(cString: g_variant_get_string(variant, nil)))
        case "b": self = .boolean(g_variant_get_boolean(variant) != 0)
        case "u": self = .uint32(g_variant_get_uint32(variant))
        case "t": self = .uint64(UInt64(g_variant_get_uint64(variant)))
        case "ay":
            var count: gsize = 0
            let base = g_variant_get_fixed_array(variant, &count, 1)
            self = .bytes(
                count == 0 || base == nil ? [] : Array(UnsafeRawBufferPointer(start: base, count: Int(count))))
        case "v":
            let inner = g_variant_get_variant(variant)!
            defer { g_variant_unref(inner) }
            guard let value = BusValue(inner) else { return nil }
            self = .variant(value)
        default:
            // Only a container has children to read; any other type (an int32, a double, …) is none of the API's.
            guard g_variant_is_container(variant) != 0, type != "v" else { return nil }
            let children = (0..<Int(g_variant_n_children(variant))).map { index -> BusValue? in
                let child = g_variant_get_child_value(variant, gsize(index))!
                defer { g_variant_unref(child) }
                return BusValue(child)
            }
            guard !children.contains(where: { $0 == nil }) else { return nil }
            let values = children.map { $0! }
            if type.hasPrefix("a{") {
                let inner = String(type.dropFirst(2).dropLast())
                let keyType = String(inner.prefix(1))
                let pairs = values.compactMap { value -> (BusValue, BusValue)? in
                    guard case .tuple(let pair) = value, pair.count == 2 else { return nil }
                    return (pair[0], pair[1])
                }
                self = .dictionary(
                    keyType: keyType, valueType: String(inner.dropFirst()), pairs.map(\.0), pairs.map(\.1))
            } else if type.hasPrefix("a") {
                self = .array(elementType: String(type.dropFirst()), values)
            } else if type.hasPrefix("(") || type.hasPrefix("{") {
                self = .tuple(values)
            } else {
                return nil
            }
        }
    }

    // MARK: Reading

    var string: String? {
        switch self {
        case .string(let text), .objectPath(let text): text
        default: nil
        }
    }

    var members: [BusValue]? {
        switch self {
        case .tuple(let values), .array(_, let values): values
        default: nil
        }
    }

    /// `a{ss}` as a Swift dictionary (the last of a repeated key).
    var stringMap: [String: String]? {
        guard case .dictionary(_, _, let keys, let values) = self else { return nil }
        var map: [String: String] = [:]
        for (key, value) in zip(keys, values) {
            guard let key = key.string, let value = value.string else { return nil }
            map[key] = value
        }
        return map
    }

    /// `a{sv}` as a Swift dictionary of the variants' values.
    var properties: [String: BusValue]? {
        guard case .dictionary(_, _, let keys, let values) = self else { return nil }
        var map: [String: BusValue] = [:]
        for (key, value) in zip(keys, values) {
            guard let key = key.string, case .variant(let inner) = value else { return nil }
            map[key] = inner
        }
        return map
    }
}
