import Foundation
import Testing

@testable import KeychainStore

@Suite("Attribute codec")
struct AttributeCodecTests {
    @Test func everyValueTypeRoundTrips() throws {
        let attributes: [String: KeychainValue] = [
            "acct": .string("alice ✓"), "gena": .data(Data([0, 1, 2, 255])), "port": .integer(-42),
            "invi": .bool(true), "cdat": .date(Date(timeIntervalSinceReferenceDate: 12345.678)),
            "accc": .accessControl(AccessControlPolicy(protection: "ak", flags: 0x4000_0001)),
            "labl": .string(""), "atag": .data(Data()),
        ]
        #expect(try AttributeCodec.decode(AttributeCodec.encode(attributes)) == attributes)
    }

    @Test func equalDictionariesEncodeToEqualBytes() {
        var first: [String: KeychainValue] = [:]
        var second: [String: KeychainValue] = [:]
        for index in 0..<50 { first["k\(index)"] = .integer(Int64(index)) }
        for index in (0..<50).reversed() { second["k\(index)"] = .integer(Int64(index)) }
        #expect(AttributeCodec.encode(first) == AttributeCodec.encode(second))
    }

    @Test func truncatedOrTrailingBytesAreRejected() {
        let encoded = AttributeCodec.encode(["acct": .string("alice"), "port": .integer(443)])
        for cut in [1, 5, encoded.count - 1] {
            #expect(throws: StoreError.self) { try AttributeCodec.decode(encoded.prefix(cut)) }
        }
        #expect(throws: StoreError.self) { try AttributeCodec.decode(encoded + Data([0])) }
    }
}
