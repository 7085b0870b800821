import Foundation
import SecurityProtocol
import Testing

/// Which keychain requests localauthd serves on the connection's own thread (and clients send over the lane).
@Suite("Brief requests")
struct BriefRequestTests {
    private static func lookup(limit: KeychainValue?) -> KeychainRequest {
        var query: [String: KeychainValue] = ["class": .string("genp"), "acct": .string("a"), "r_Data": .bool(true)]
        query["m_Limit"] = limit
        return .copyMatching(query)
    }

    /// Apple's code asks for one item with `kSecMatchLimitOne` (the string `m_LimitOne`) as often as it leaves the
    /// limit out; both are the one-row lookup the fast path serves.
    @Test func aLookupOfOneItemIsBriefHoweverTheLimitIsSpelled() {
        #expect(Self.lookup(limit: nil).isBrief)
        #expect(Self.lookup(limit: .string("m_LimitOne")).isBrief)
        #expect(Self.lookup(limit: .integer(1)).isBrief)
        #expect(Self.lookup(limit: .string("m_LimitOne")).mayTakeLane)
    }

    @Test func lookupsOfManyItemsAndWritesOfManyAreNotBrief() {
        #expect(!Self.lookup(limit: .string("m_LimitAll")).isBrief)
        #expect(!Self.lookup(limit: .integer(2)).isBrief)
        #expect(!KeychainRequest.update(query: ["class": .string("genp")], attributes: ["labl": .string("x")]).isBrief)
        #expect(!KeychainRequest.delete(["class": .string("genp")]).isBrief)
    }

    @Test func aRequestNamingAContextDoesNotTakeTheLane() {
        var query: [String: KeychainValue] = ["class": .string("genp"), "acct": .string("a")]
        query["u_AuthCtx"] = .data(Data(repeating: 1, count: 32))
        #expect(KeychainRequest.copyMatching(query).isBrief)
        #expect(!KeychainRequest.copyMatching(query).mayTakeLane)
    }
}
