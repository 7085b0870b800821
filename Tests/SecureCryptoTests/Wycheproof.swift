import Foundation
import Testing

/// Loads Project Wycheproof vector files (Apache-2.0, copied from `../shared/vectors/wycheproof/`) and tallies
/// outcomes per result and flag, in the shape of swift-crypto's Wycheproof runner.
struct Wycheproof<Group: Decodable>: Decodable {
    var algorithm: String
    var numberOfTests: Int
    var testGroups: [Group]

    static func load(_ name: String) throws -> Wycheproof<Group> {
        let url = try #require(Bundle.module.url(forResource: "Vectors/\(name)", withExtension: "json"))
        return try JSONDecoder().decode(Wycheproof<Group>.self, from: Data(contentsOf: url))
    }
}

/// What a runner did with one vector.
enum VectorOutcome: String {
    case accepted
    case rejected
    case skipped
}

/// Counts outcomes, and for `acceptable` vectors records which way each flag went, so the test output documents it.
struct VectorTally {
    var file: String
    var counts: [String: Int] = [:]
    var acceptableByFlag: [String: [VectorOutcome: Int]] = [:]
    var skipReasons: [String: Int] = [:]
    var failures: [String] = []

    /// Checks one vector: `valid` must be accepted, `invalid` must be rejected, `acceptable` may go either way.
    mutating func record(tcId: Int, result: String, flags: [String], outcome: VectorOutcome, skipReason: String? = nil)
    {
        counts["\(result)/\(outcome.rawValue)", default: 0] += 1
        switch (result, outcome) {
        case (_, .skipped):
            skipReasons[skipReason ?? "unspecified", default: 0] += 1
        case ("valid", .rejected):
            failures.append("tcId \(tcId) (valid, flags \(flags)) was rejected")
        case ("invalid", .accepted):
            failures.append("tcId \(tcId) (invalid, flags \(flags)) was accepted")
        case ("acceptable", _):
            for flag in flags { acceptableByFlag[flag, default: [:]][outcome, default: 0] += 1 }
        default:
            break
        }
    }

    /// Prints the tally and fails the test for every valid vector rejected or invalid vector accepted.
    func finish(expectedTotal: Int) {
        let total = counts.values.reduce(0, +)
        var lines = [
            "\(file): \(total) vectors: "
                + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        ]
        for (flag, outcomes) in acceptableByFlag.sorted(by: { $0.key < $1.key }) {
            lines.append(
                "  acceptable flag \(flag): "
                    + outcomes.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }
                    .joined(separator: ", "))
        }
        for (reason, count) in skipReasons.sorted(by: { $0.key < $1.key }) {
            lines.append("  skipped \(count): \(reason)")
        }
        print(lines.joined(separator: "\n"))
        #expect(total == expectedTotal, "every vector in \(file) was looked at")
        #expect(failures.isEmpty, "\(file): \(failures.prefix(20).joined(separator: "; "))")
    }
}
