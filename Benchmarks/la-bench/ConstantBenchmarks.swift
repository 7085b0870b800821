import Foundation
import KeychainServices

/// What reading Apple's constants costs: a `kSec…` constant is an `NSString` object (as Apple's `CFString`s are),
/// so code that writes `String(kSecClass)` or builds its query from constants bridges each one. Baselines: the same
/// bridging of a plain `NSString`, and the same query written with `String` literals.
enum ConstantBenchmarks {
    static func run() async throws {
        print("== constants: Apple's string constants read as Swift strings (per thread CPU second)")
        let plain = NSString(string: "class")
        var characters = 0
        let constant = Measure.opsPerSecond { characters &+= String(kSecClass).utf8.count }
        let baseline = Measure.opsPerSecond { characters &+= String(plain).utf8.count }
        Measure.report("String(kSecClass)", ours: constant, baseline: baseline, baselineName: "String(NSString)")
        var keys = 0
        let account = "alice"
        let query = Measure.opsPerSecond {
            let query: [String: Any] = [
                String(kSecClass): kSecClassGenericPassword, kSecAttrAccount as String: account,
                kSecAttrService as String: "svc", kSecReturnData as String: true,
                kSecMatchLimit as String: kSecMatchLimitOne,
            ]
            keys &+= query.count
        }
        let literals = Measure.opsPerSecond {
            let query: [String: Any] = [
                "class": "genp", "acct": account, "svce": "svc", "r_Data": true, "m_Limit": "m_LimitOne",
            ]
            keys &+= query.count
        }
        Measure.report(
            "a query of constants", ours: query, baseline: literals, baselineName: "the same of String literals")
        if characters == 0 || keys == 0 { print("(nothing measured)") }
    }
}
