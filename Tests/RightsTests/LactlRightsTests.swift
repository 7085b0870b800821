import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient
import TestSupport
import Testing

@Suite("lactl rights list and remove", .serialized, .virtualReaderLock)
struct LactlRightsTests {
    /// Runs `lactl rights <arguments>` on `world`'s store (`--data-dir` embedded, its daemon in daemon mode);
    /// returns the exit status and standard output.
    func lactl(_ arguments: [String], world: RightsWorld) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = try lactlExecutable()
        process.arguments =
            ["rights"] + arguments + (world.engine.mode == .embedded ? ["--data-dir", world.storeDirectory] : [])
        process.environment = world.subprocessEnvironment()
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func listsAndRemovesRightsWithTheirKeysAndSecrets() async throws {
        let world = try RightsWorld()
        try await world.run {
            _ = try await LARightStore.shared.saveRight(LARight(), identifier: "access-token", secret: Data("t".utf8))
            _ = try await LARightStore.shared.saveRight(LARight(requirement: .biometry), identifier: "show-account")
        }
        let (listed, listing) = try lactl(["list"], world: world)
        #expect(listed == 0)
        #expect(listing == "access-token\ttest.rights\tuserPresence\nshow-account\ttest.rights\tbiometry\n")
        #expect(!listing.contains("t\n\t"))
        let (removed, _) = try lactl(["remove", "access-token"], world: world)
        #expect(removed == 0)
        let (missing, _) = try lactl(["remove", "access-token"], world: world)
        #expect(missing == 44)
        try await world.run {
            await #expect(throws: (any Error).self) {
                try await LARightStore.shared.right(forIdentifier: "access-token")
            }
            let identifiers = try LARightStore.shared.identifiers()
            #expect(identifiers == ["show-account"])
            var result: CFTypeRef?
            let status = SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassKey, kSecMatchLimit as String: kSecMatchLimitAll,
                    kSecReturnAttributes as String: true,
                ] as CFDictionary, &result)
            #expect(status == errSecSuccess && (result as? [Any])?.count == 1)
        }
        #expect(try lactl(["remove", "show-account"], world: world).0 == 0)
        #expect(try lactl(["list"], world: world) == (0, "No rights are saved.\n"))
        await world.close()
    }
}
