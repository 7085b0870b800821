import Foundation
import TestSupport
import Testing

/// `scripts/check-imports` (run by `make test`) passes on the repository and fails on a copy of the public modules
/// where one file imports an engine module, or where a SecurityClient file does (a program that talks to localauthd
/// through SecurityClient links no engine).
@Suite("The public modules' imports")
struct SeamImportTests {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func check(_ directory: URL) throws -> (Int32, String) {
        try runCapturingOutput(root.appendingPathComponent("scripts/check-imports"), [directory.path])
    }

    @Test func theRepositoryPassesAndAnEngineImportFails() throws {
        let (clean, said) = try check(root)
        #expect(clean == 0, "\(said)")

        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("imports-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: copy) }
        let files = FileManager.default
        let checked = ["LocalAuthentication", "KeychainServices", "SwiftKeychain", "SecurityClient", "EmbeddedEngine"]
        for module in try files.contentsOfDirectory(atPath: root.appendingPathComponent("Sources").path) {
            let target = copy.appendingPathComponent("Sources/\(module)")
            if checked.contains(module) {
                try files.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try files.copyItem(at: root.appendingPathComponent("Sources/\(module)"), to: target)
            } else {
                try files.createDirectory(at: target, withIntermediateDirectories: true)
            }
        }
        let (copied, _) = try check(copy)
        #expect(copied == 0)
        for (file, module) in [
            ("KeychainServices/SecItem.swift", "KeychainStore"),
            ("SecurityClient/PresenterQueue.swift", "SecurityServer"),
            ("SecurityClient/SocketClient.swift", "EmbeddedEngine"), ("LocalAuthentication/LAContext.swift", "Enclave"),
        ] {
            let url = copy.appendingPathComponent("Sources/\(file)")
            let original = try String(contentsOf: url, encoding: .utf8)
            try ("internal import \(module)\n" + original).write(to: url, atomically: true, encoding: .utf8)
            let (dirty, complaint) = try check(copy)
            #expect(dirty == 1)
            #expect(complaint.contains("Sources/\(file):1: imports \(module)"))
            try original.write(to: url, atomically: true, encoding: .utf8)
        }
    }
}
