import FIDOAuthenticator
import FIDOProtocol
import Testing

/// CTAP1/U2F's command APDUs in both encodings, and what the authenticator answers requests it cannot take, before
/// any keychain is read.
@Suite("FIDO: U2F requests")
struct U2FTests {
    @Test func shortAndExtendedEncodingsParseAlike() throws {
        let data: [UInt8] = Array(0..<64)
        let expected = U2F.Command(ins: 1, p1: 3, data: data)
        // Extended with and without Le; short with and without Le.
        #expect(try U2F.Command(expected.encoded) == expected)
        #expect(try U2F.Command(Array(expected.encoded.dropLast(2))) == expected)
        #expect(try U2F.Command([0, 1, 3, 0, 64] + data) == expected)
        #expect(try U2F.Command([0, 1, 3, 0, 64] + data + [0]) == expected)
        // No data: nothing after the header, a short Le, an extended Le, and python-fido2's Lc of zero with an Le.
        for bytes: [UInt8] in [[0, 3, 0, 0], [0, 3, 0, 0, 0], [0, 3, 0, 0, 0, 0, 0], [0, 3, 0, 0, 0, 0, 0, 0, 0]] {
            #expect(try U2F.Command(bytes) == U2F.Command(ins: 3), "\(bytes)")
        }
    }

    @Test func lengthsThatDoNotAddUpAreRefused() {
        for bytes: [UInt8] in [
            [0, 1, 3], [0, 1, 3, 0, 64, 1, 2], [0, 1, 3, 0, 0, 0, 64, 1], [0, 1, 3, 0, 0, 1],
            [0, 1, 3, 0, 2, 1, 2, 3, 4],
        ] {
            #expect(throws: U2F.StatusWord.wrongLength, "\(bytes)") { try U2F.Command(bytes) }
        }
    }

    @Test func requestsTheAuthenticatorCannotTakeGetTheirStatusWord() async {
        let authenticator = FIDOAuthenticator()
        func answer(_ bytes: [UInt8]) async -> [UInt8] { await authenticator.respondU2F(to: bytes) }
        #expect(await answer(U2F.Command(ins: 3).encoded) == Array("U2F_V2".utf8) + [0x90, 0x00])
        #expect(await answer(U2F.Command(cla: 0x80, ins: 3).encoded) == [0x6E, 0x00])
        #expect(await answer(U2F.Command(ins: 0x40).encoded) == [0x6D, 0x00])
        // A registration of 63 bytes, an authentication whose key handle length does not match.
        #expect(await answer(U2F.Command(ins: 1, p1: 3, data: Array(repeating: 1, count: 63)).encoded) == [0x67, 0x00])
        let authenticate = U2F.Command(ins: 2, p1: 3, data: Array(repeating: 1, count: 64) + [16, 1, 2])
        #expect(await answer(authenticate.encoded) == [0x67, 0x00])
        #expect(await answer([0, 1]) == [0x67, 0x00])
    }
}
