import Foundation
import Testing
import TestSupport

/// `scripts/check-imports` (run by `make test`) passes on the repository and fails on a copy of the public modules
/// where one file imports an engine module.
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
        try files.createDirectory(at: copy.appendingPathComponent("scripts"), withIntermediateDirectories: true)
        try files.copyItem(
            at: root.appendingPathComponent("scripts/check-imports.allowed"),
            to: copy.appendingPathComponent("scripts/check-imports.allowed"))
        for module in try files.contentsOfDirectory(atPath: root.appendingPathComponent("Sources").path) {
            let target = copy.appendingPathComponent("Sources/\(module)")
            if module == "LocalAuthentication" || module == "KeychainServices" {
                try files.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try files.copyItem(at: root.appendingPathComponent("Sources/\(module)"), to: target)
            } else {
                try files.createDirectory(at: target, withIntermediateDirectories: true)
            }
        }
        let secItem = copy.appendingPathComponent("Sources/KeychainServices/SecItem.swift")
        try ("internal import KeychainStore\n" + String(contentsOf: secItem, encoding: .utf8))
            .write(to: secItem, atomically: true, encoding: .utf8)
        let (dirty, complaint) = try check(copy)
        #expect(dirty == 1)
        #expect(complaint.contains("Sources/KeychainServices/SecItem.swift:1: imports KeychainStore"))
    }
}
