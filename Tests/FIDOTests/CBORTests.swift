import FIDOProtocol
import Testing

/// CTAP 2.1's CBOR: RFC 8949 Appendix A's examples of the kinds CTAP uses, both ways; CTAP2's canonical key order;
/// and what the decoder refuses.
@Suite("FIDO: CBOR")
struct CBORTests {
    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// RFC 8949 Appendix A, every example without floats or tags.
    static let examples: [(CBOR, String)] = [
        (.unsigned(0), "00"), (.unsigned(1), "01"), (.unsigned(10), "0a"), (.unsigned(23), "17"),
        (.unsigned(24), "1818"), (.unsigned(25), "1819"), (.unsigned(100), "1864"), (.unsigned(1000), "1903e8"),
        (.unsigned(1_000_000), "1a000f4240"), (.unsigned(1_000_000_000_000), "1b000000e8d4a51000"),
        (.unsigned(UInt64.max), "1bffffffffffffffff"), (.negative(UInt64.max), "3bffffffffffffffff"),
        (.int(-1), "20"), (.int(-10), "29"), (.int(-100), "3863"), (.int(-1000), "3903e7"),
        (.bool(false), "f4"), (.bool(true), "f5"), (.null, "f6"), (.undefined, "f7"),
        (.bytes([]), "40"), (.bytes([1, 2, 3, 4]), "4401020304"),
        (.text(""), "60"), (.text("a"), "6161"), (.text("IETF"), "6449455446"), (.text("\"\\"), "62225c"),
        (.text("\u{00fc}"), "62c3bc"), (.text("\u{6c34}"), "63e6b0b4"), (.text("\u{10151}"), "64f0908591"),
        (.array([]), "80"), (.array([.unsigned(1), .unsigned(2), .unsigned(3)]), "83010203"),
        (
            .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])]),
            "8301820203820405"
        ),
        (
            .array((1...25).map { .unsigned($0) }),
            "98190102030405060708090a0b0c0d0e0f101112131415161718181819"
        ),
        (.map([]), "a0"), (.map([.unsigned(1): .unsigned(2), .unsigned(3): .unsigned(4)]), "a201020304"),
        (
            .map([.text("a"): .unsigned(1), .text("b"): .array([.unsigned(2), .unsigned(3)])]),
            "a26161016162820203"
        ),
        (.array([.text("a"), .map([.text("b"): .text("c")])]), "826161a161626163"),
        (
            .map([
                .text("a"): .text("A"), .text("b"): .text("B"), .text("c"): .text("C"), .text("d"): .text("D"),
                .text("e"): .text("E"),
            ]),
            "a56161614161626142616361436164614461656145"
        ),
    ]

    @Test func rfc8949ExamplesEncodeAndDecode() throws {
        for (item, encoding) in Self.examples {
            #expect(item.encoded() == Self.hex(encoding), "\(item)")
            #expect(try CBOR(decoding: Self.hex(encoding)) == item, "\(encoding)")
        }
    }

    /// CTAP 2.1 §8.1's example order: 10, 100, -1, "z", "aa", false, whatever order the pairs were given in.
    @Test func mapKeysAreWrittenInCTAPCanonicalOrder() throws {
        let keys: [CBOR] = [.bool(false), .text("aa"), .int(-1), .text("z"), .unsigned(100), .unsigned(10)]
        let map = CBOR.map(keys.map { CBOR.Pair($0, .null) })
        let expected = "a6" + ["0a", "1864", "20", "617a", "626161", "f4"].map { $0 + "f6" }.joined()
        #expect(map.encoded() == Self.hex(expected))
        // A COSE key: 1, 3, -1, -2, -3.
        let cose = CBOR.map([
            .int(-3): .bytes([3]), .int(1): .unsigned(2), .int(-1): .unsigned(1), .int(3): .int(-7),
            .int(-2): .bytes([2]),
        ])
        #expect(cose.encoded() == Self.hex("a5010203262001214102224103"))
    }

    @Test func lookupsReadMapsByIntegerAndTextKeys() throws {
        let map = try CBOR(decoding: Self.hex("a201020304"))
        #expect(map[1] == .unsigned(2) && map[3]?.intValue == 4 && map[2] == nil)
        let texts = try CBOR(decoding: Self.hex("a26161016162820203"))
        #expect(texts["b"]?.arrayValue?.count == 2 && texts["a"]?.intValue == 1)
    }

    /// Floats, tags, indefinite lengths, other simple values, bad UTF-8, a key twice, trailing bytes, truncation,
    /// lengths beyond the input and nesting beyond the limit are refused, each with its reason.
    @Test func whatCTAPDoesNotUseIsRefused() {
        let refused: [(String, CBORError)] = [
            ("f90000", .unsupported(0xF9)), ("fa47c35000", .unsupported(0xFA)), ("c11a514b67b0", .unsupported(0xC1)),
            ("5f42010243030405ff", .unsupported(0x5F)), ("9fff", .unsupported(0x9F)), ("f0", .unsupported(0xF0)),
            ("f818", .unsupported(0xF8)), ("1c", .unsupported(0x1C)), ("62c328", .invalidText),
            ("a201020103", .duplicateKey), ("0000", .trailingBytes), ("1903", .truncated), ("44010203", .truncated),
            ("9bffffffffffffffff", .lengthTooLarge), ("5bffffffffffffffff", .lengthTooLarge),
            ("818181818181818181818100", .tooDeep),
        ]
        for (input, reason) in refused {
            #expect(throws: reason, "\(input)") { try CBOR(decoding: Self.hex(input)) }
        }
        #expect(throws: CBORError.truncated) { try CBOR(decoding: []) }
    }

    /// Eight levels are allowed, nine are not.
    @Test func nestingStopsAtTheLimit() throws {
        let eight = [UInt8](repeating: 0x81, count: CBOR.maximumDepth) + [0x00]
        #expect(try CBOR(decoding: eight).encoded() == eight)
        #expect(throws: CBORError.tooDeep) { try CBOR(decoding: [0x81] + eight) }
    }
}
