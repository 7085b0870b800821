import Foundation
import SecureCrypto
import SecurityProtocol
import TestSupport
import Testing

@testable import SecurityServer

/// The lookup's hot path reads the request's dictionary itself, beside `ItemQuery`'s parser: every query it answers
/// must get exactly what the general path gives (items, data, persistent references, single or array, or the same
/// error), whatever the query (classes, primary keys complete or not, values of other types, access groups held or
/// not, synchronizable, return flags, match limits, extra keys), the caller and the lock state.
@Suite("The lookup's hot path answers as the general path does")
struct FastPathAgreementTests {
    typealias Generator = SplitMix64

    /// The values each primary-key attribute takes in the store: two of each kind, so queries often name a row.
    static let pool: [String: [KeychainValue]] = [
        "acct": [.string("a"), .string("b")], "svce": [.string("s"), .data(Data("t".utf8))],
        "sdmn": [.string(""), .string("realm")], "srvr": [.string("example.org"), .string("example.net")],
        "ptcl": [.string("htps"), .string("ftp ")], "atyp": [.string("dflt"), .string("form")],
        "port": [.integer(443), .integer(0)], "path": [.string(""), .string("/x")],
    ]

    /// What a query may put under a primary-key attribute besides a stored value: another kind of value.
    static let strays: [KeychainValue] = [
        .integer(443), .string("443"), .data(Data("a".utf8)), .bool(true), .string("zzz"), .data(Data([0xFF, 0xFE])),
    ]

    static func pick<T>(_ values: [T], _ generator: inout Generator) -> T {
        values[Int(generator.next() % UInt64(values.count))]
    }

    static func chance(_ percent: UInt64, _ generator: inout Generator) -> Bool { generator.next() % 100 < percent }

    /// A lookup made of the keys the hot path reads, and now and then one it leaves to the general path.
    static func query(_ generator: inout Generator) -> [String: KeychainValue] {
        var query: [String: KeychainValue] = [:]
        let itemClass = pick(
            ["genp", "genp", "genp", "inet", "inet", "inet", "cert", "keys", "idnt", "bogus"], &generator)
        if !chance(3, &generator) { query["class"] = .string(itemClass) }
        let names = ItemClass(rawValue: itemClass).map { AttributeSchema.primaryKey(of: $0) } ?? ["acct", "svce"]
        for name in names where !chance(8, &generator) {
            query[name] = chance(8, &generator) ? pick(strays, &generator) : pick(pool[name] ?? strays, &generator)
        }
        if chance(45, &generator) { query["agrp"] = .string(pick(["g1", "g2", "g3", ""], &generator)) }
        if chance(35, &generator) {
            query["sync"] = pick([.bool(true), .bool(false), .string("syna"), .integer(1), .string("x")], &generator)
        }
        if !chance(15, &generator) {
            query["r_Data"] = pick([.bool(true), .bool(true), .bool(true), .bool(false), .integer(1)], &generator)
        }
        if chance(30, &generator) { query["r_PersistentRef"] = pick([.bool(true), .bool(false)], &generator) }
        if chance(55, &generator) {
            query["m_Limit"] = pick(
                [
                    .string("m_LimitOne"), .string("m_LimitAll"), .integer(1), .integer(2), .integer(0), .integer(-1),
                    .string("x"), .bool(true),
                ], &generator)
        }
        if chance(8, &generator) {
            let extra = pick(
                [
                    ("labl", KeychainValue.string("label")), ("r_Attributes", .bool(true)), ("r_Ref", .bool(true)),
                    ("m_CaseInsensitive", .bool(true)), ("pdmn", .string("ak")),
                ], &generator)
            query[extra.0] = extra.1
        }
        return query
    }

    /// A failure as the caller sees it: its status (the messages of the two paths may word it differently).
    struct Failure: Error, Equatable {
        let code: KeychainStatus.Code
        init(_ error: any Error) { code = KeychainEngine.status(error).code }
    }

    /// The general path's answer: the parsed query looked up with the hot path turned off.
    static func general(
        _ engine: KeychainEngine, _ query: [String: KeychainValue], _ caller: CallerIdentity
    ) -> Result<ItemResults, Failure> {
        do {
            let parsed = try engine.parse(query, for: .copyMatching, caller: caller)
            return .success(try engine.copyMatching(parsed, caller: caller, direct: false))
        } catch {
            return .failure(Failure(error))
        }
    }

    /// A hot path's answer, nil when it leaves the query (or the row) to the general path.
    static func hot(_ body: () throws -> KeychainEngine.DirectOutcome) -> Result<ItemResults, Failure>? {
        do {
            guard case .answered(let results) = try body() else { return nil }
            return .success(results)
        } catch {
            return .failure(Failure(error))
        }
    }

    @Test func everyGeneratedLookupGetsTheGeneralPathsAnswer() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fast-path-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let engine = try KeychainEngine(directory: directory)
        let owner = CallerIdentity(accessGroups: ["g1", "g2"])
        var generator = Generator(seed: 0x5EED)
        // Rows in two groups, both synchronizable values, two protection classes.
        var stored = 0
        for index in 0..<160 {
            var item: [String: KeychainValue] = ["class": .string(Self.pick(["genp", "inet"], &generator))]
            for name in AttributeSchema.primaryKey(of: ItemClass(rawValue: item["class"]!.stringValue!)!) {
                item[name] = Self.pick(Self.pool[name]!, &generator)
            }
            item["agrp"] = .string(Self.pick(["g1", "g2"], &generator))
            item["sync"] = .bool(Self.chance(30, &generator))
            item["pdmn"] = .string(Self.pick(["ak", "dk"], &generator))
            item["v_Data"] = .secret(SecureBytes(Array("secret \(index)".utf8)))
            if (try? engine.handle(.add(item), caller: owner)) != nil { stored += 1 }
        }
        #expect(stored > 60)

        let callers = [
            CallerIdentity(accessGroups: ["g1"]), CallerIdentity(accessGroups: ["g1", "g2"]),
            CallerIdentity(accessGroups: ["g2", "g3"]), CallerIdentity(accessGroups: ["g1"], mayAccessAllGroups: true),
        ]
        var answered = (items: 0, errors: 0)
        for round in 0..<2 {
            if round == 1 { _ = try engine.handle(.lock, caller: owner) }  // "ak" rows refuse, "dk" rows answer
            for seed in 0..<5_000 {
                var generator = Generator(seed: UInt64(seed) &* 7919 &+ UInt64(round))
                let query = Self.query(&generator)
                let caller = Self.pick(callers, &generator)
                let general = Self.general(engine, query, caller)
                if let fast = Self.hot({ try engine.directLookup(query, caller: caller) }) {
                    #expect(fast == general, "seed \(seed), round \(round), \(caller.accessGroups): \(query)")
                    if case .success = fast { answered.items += 1 } else { answered.errors += 1 }
                }
                // The hot path for a query already parsed (one with an operation prompt, say) agrees too.
                if let parsed = try? engine.parse(query, for: .copyMatching, caller: caller),
                    let fast = Self.hot({ try engine.directLookup(parsed, caller: caller) })
                {
                    #expect(fast == general, "parsed: seed \(seed), round \(round): \(query)")
                }
            }
        }
        // The generator reaches the hot path often, with rows found and rows missing or locked.
        #expect(answered.items > 150, "\(answered)")
        #expect(answered.errors > 300, "\(answered)")
    }
}
