import Foundation
import SecureCrypto

/// A value that crosses the client/engine seam: it encodes to the protocol's canonical bytes and decodes back.
///
/// The layout is tag-length-value, every integer big-endian:
/// - a *record* (a struct, or an enum case's payload) is its fields in ascending tag order, each
///   `tag (UInt8) | length (UInt32) | value`; a nil optional is left out, every other field is required;
/// - an *enum with payloads* is a record of exactly one field: the case's tag, then the payload record (its
///   associated values as fields 1, 2, … in declaration order; empty for a case without any);
/// - a *scalar* fills its whole field: `Bool` one byte 0 or 1, `Int`/`Int64`/`UInt64` eight bytes, `Int32` four,
///   `Double`/`Date` the eight bytes of the IEEE 754 bit pattern (a date counts seconds from 2001-01-01), `String`
///   UTF-8, `Data` and `SecureBytes` the bytes themselves, a closed enum without payloads one byte;
/// - an *array* is `count (UInt32)` then each element as `length (UInt32) | element`; a *dictionary* with string
///   keys is `count (UInt32)` then, keys ascending by their UTF-8 bytes, `length | key | length | value`.
///
/// One value has one encoding, and the decoder accepts nothing else: fields out of order or repeated, unknown tags,
/// truncated or trailing bytes, unsorted keys and non-0/1 Booleans all throw ``MessageDecodingError``.
/// A frame (``encoded()``) is a format-version byte, then the value with its 32-bit length, so that a frame cut
/// short anywhere is `truncated`, never a shorter value.
package protocol ProtocolCodable: Sendable {
    /// Writes the value's body (a record's fields, or a scalar's bytes).
    func encode(into writer: inout MessageWriter)

    /// Reads a value's body from `reader`, which is limited to the value's own bytes.
    ///
    /// - Throws: ``MessageDecodingError`` for anything malformed.
    init(from reader: inout MessageReader) throws
}

extension ProtocolCodable {
    /// The value as a frame (the format version, then the value with its length), in zeroizing memory: messages
    /// carry secrets.
    package func encoded() -> SecureBytes {
        var writer = MessageWriter()
        writer.byte(MessageWriter.formatVersion)
        writer.lengthPrefixed { encode(into: &$0) }
        return writer.secureBytes
    }

    /// Decodes a frame that ``encoded()`` produced.
    ///
    /// - Throws: ``MessageDecodingError`` when the frame is malformed, not canonical, or beyond `limits`.
    package init(decoding frame: SecureBytes, limits: MessageLimits = .default) throws {
        self = try frame.withUnsafeBytes { try Self(decodingFrame: $0, limits: limits) }
    }

    /// Decodes a frame held in ordinary memory (bytes read from a socket, a test's vector).
    ///
    /// - Throws: ``MessageDecodingError`` when the frame is malformed, not canonical, or beyond `limits`.
    package init(decoding bytes: some ContiguousBytes, limits: MessageLimits = .default) throws {
        self = try bytes.withUnsafeBytes { try Self(decodingFrame: $0, limits: limits) }
    }

    /// Decodes a frame read in place (a socket's frame, which is wiped once read).
    ///
    /// - Throws: ``MessageDecodingError`` when the frame is malformed, not canonical, or beyond `limits`.
    package init(decoding frame: RawSpan, limits: MessageLimits = .default) throws {
        self = try frame.withUnsafeBytes { try Self(decodingFrame: $0, limits: limits) }
    }

    private init(decodingFrame buffer: UnsafeRawBufferPointer, limits: MessageLimits) throws {
        self = try MessageReader.read(buffer, limits: limits) { reader in
            let version = try reader.byte()
            guard version == MessageWriter.formatVersion else {
                throw MessageDecodingError(
                    .unsupportedVersion, at: 0, "frame format \(version), expected \(MessageWriter.formatVersion)")
            }
            return try reader.lengthPrefixed { try Self(from: &$0) }
        }
    }
}

extension ProtocolCodable where Self: RawRepresentable, RawValue: ProtocolCodable {
    /// The raw value.
    package func encode(into writer: inout MessageWriter) {
        rawValue.encode(into: &writer)
    }

    /// The value with the decoded raw value. - Throws: ``MessageDecodingError`` (`invalidValue`) when there is none.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        guard let value = Self(rawValue: try RawValue(from: &reader)) else {
            throw MessageDecodingError(.invalidValue, at: start, "no \(Self.self) has this raw value")
        }
        self = value
    }
}
