import Foundation
import SecurityProtocol
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
            "acls": .access(
                ItemAccess(
                    descriptor: "mail ✓",
                    applications: [
                        TrustedApplication(
                            applicationIdentifier: "TEAM.mail", executable: "/usr/bin/mail",
                            codeDigest: Data(repeating: 0xA5, count: 32)),
                        TrustedApplication(applicationIdentifier: "", executable: "", codeDigest: Data()),
                    ])),
        ]
        #expect(try AttributeCodec.decode(AttributeCodec.encode(attributes)) == attributes)
    }

    /// A trusted-application list has tag 8: its descriptor, a count, then identifier, path and digest per program.
    @Test func aTrustedApplicationListEncodesToThePinnedBytes() throws {
        let access = ItemAccess(
            descriptor: "d",
            applications: [
                TrustedApplication(applicationIdentifier: "T.a", executable: "/x", codeDigest: Data([1, 2]))
            ])
        let hex = AttributeCodec.encode(["acls": .access(access)]).map { String(format: "%02x", $0) }.joined()
        #expect(
            hex == "01" + "00000001" + "0000000461636c73" + "08" + "0000000164" + "00000001" + "00000003542e61"
                + "000000022f78" + "000000020102")
        #expect(try AttributeCodec.decode(Data(hexString: hex)) == ["acls": .access(access)])
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

@Suite("Attribute codec: on-disk bytes")
struct AttributeCodecGoldenTests {
    /// Stores written before the codec moved onto SecurityProtocol's writer must still open: these are the bytes the
    /// original codec produced for every value type (including a bound access-control list and a non-ASCII key).
    @Test func everyValueTypeEncodesToThePinnedBytes() throws {
        let attributes: [String: KeychainValue] = [
            "acct": .string("alice ✓"), "gena": .data(Data([0, 1, 2, 255])), "port": .integer(-42),
            "invi": .bool(true), "cdat": .date(Date(timeIntervalSinceReferenceDate: 12345.678)),
            "accc": .accessControl(AccessControlPolicy(protection: "ak", flags: 0x4000_0001)),
            "bacc": .accessControl(AccessControlPolicy(protection: "aku", flags: 2, boundStateHash: Data([9, 8]))),
            "é": .string(""),
        ]
        let hex = AttributeCodec.encode(attributes).map { String(format: "%02x", $0) }.joined()
        // The version and the count, then one entry a line, keys in `sorted()` order: key, tag, value.
        let pinned = [
            "01" + "00000008",
            "00000004616363630600000002616b0000000040000001",
            "00000004616363740100000009616c69636520e29c93",
            "00000004626163630700000003616b750000000000000002000000020908",
            "00000004636461740540c81cd6c8b43958",
            "0000000467656e610200000004000102ff",
            "00000004696e76690401",
            "00000004706f727403ffffffffffffffd6",
            "00000002c3a90100000000",
        ]
        #expect(hex == pinned.joined())
        #expect(try AttributeCodec.decode(Data(hexString: hex)) == attributes)
    }
}

extension Data {
    fileprivate init(hexString: String) {
        var bytes: [UInt8] = []
        var digits = hexString.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            bytes.append(UInt8(high.hexDigitValue! << 4 | low.hexDigitValue!))
        }
        self.init(bytes)
    }
}
