import Foundation
import SecureCrypto
import SecurityProtocol
import Testing

@testable import Authenticators

#if canImport(Glibc)
    import Glibc
#endif

/// The encrypted file store of enrolled prints, and the attempt policy's file.
@Suite("Enrolled print store and policy files")
struct EnrolledPrintStoreTests {
    static func print(_ marker: String, finger: Finger = .leftThumb) throws -> EnrolledPrint {
        EnrolledPrint(
            info: EnrolledPrintInfo(
                identifier: try .random(), finger: finger, username: "alice", driver: "virtual_device",
                deviceID: "0", enrolledAt: Date(timeIntervalSince1970: 1_800_000_000)),
            template: SecureBytes(Array("FP3-\(marker)".utf8)))
    }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    @Test func templatesAreEncryptedAtRestInPrivateFilesAndReadBack() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileEnrolledPrintStore(directory: directory.path + "/prints")
        let print = try Self.print("TEMPLATE-MARKER")

        try store.save(print)

        let file = store.directory + "/\(print.info.identifier.hex).print"
        let raw = try #require(FileManager.default.contents(atPath: file))
        #expect(raw.range(of: Data("TEMPLATE-MARKER".utf8)) == nil)
        #expect(raw.range(of: Data("alice".utf8)) == nil)
        #expect(Self.mode(file) == 0o600)
        #expect(Self.mode(store.directory) == 0o700)
        #expect(Self.mode(store.directory + "/store.key") == 0o600)
        let loaded = try #require(try store.prints().first)
        #expect(loaded.info == print.info)
        #expect(loaded.template == print.template)
    }

    @Test func swappedPrintFilesDoNotOpen() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileEnrolledPrintStore(directory: directory.path)
        let first = try Self.print("one")
        let second = try Self.print("two")
        try store.save(first)
        try store.save(second)
        let firstPath = store.directory + "/\(first.info.identifier.hex).print"
        let secondPath = store.directory + "/\(second.info.identifier.hex).print"
        let firstData = try #require(FileManager.default.contents(atPath: firstPath))
        let secondData = try #require(FileManager.default.contents(atPath: secondPath))
        try firstData.write(to: URL(fileURLWithPath: secondPath))
        try secondData.write(to: URL(fileURLWithPath: firstPath))

        #expect(throws: AuthenticationError.self) { try store.prints() }
    }

    @Test func stateHashIsSHA256OfSaltAndSortedIdentifiersAndNilWhenEmpty() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileEnrolledPrintStore(directory: directory.path)
        #expect(try store.stateHash() == nil)
        let prints = try (0..<3).map { try Self.print("p\($0)") }
        for print in prints { try store.save(print) }

        var expected = SHA256()
        expected.update(try store.installSalt())
        for identifier in prints.map(\.info.identifier).sorted() { expected.update(identifier.bytes) }

        #expect(try store.stateHash() == expected.finalize())
        let otherInstall = try FileEnrolledPrintStore(directory: directory.path + "/other")
        for print in prints { try otherInstall.save(print) }
        #expect(try otherInstall.stateHash() != store.stateHash(), "the per-install salt must enter the hash")
    }

    @Test func removingTheFingersAddedSinceNeverBringsAnEarlierStateHashBack() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileEnrolledPrintStore(directory: directory.path)
        let first = try Self.print("first")
        try store.save(first)
        let original = try store.stateHash()
        let added = try Self.print("added")
        try store.save(added)
        #expect(try store.stateHash() != original)
        #expect(try store.remove(added.info.identifier))
        #expect(try store.prints().map(\.info.identifier) == [first.info.identifier], "the same set as before")
        #expect(try store.stateHash() != original, "but not the same hash: a retired set stays retired")
        let afterRemoval = try store.stateHash()
        #expect(try store.stateHash() == afterRemoval, "and stable until the next change")
    }

    @Test func damagedPolicyFileFailsClosedInsteadOfResettingCounters() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let policy = try AttemptPolicy(directory: directory.path)
        try policy.recordPasscodeFailure()
        #expect(Self.mode(directory.path + "/" + AttemptPolicy.fileName) == 0o600)
        try Data("{garbage".utf8).write(to: URL(fileURLWithPath: directory.path + "/" + AttemptPolicy.fileName))

        #expect(throws: AuthenticationError.self) { try policy.checkPasscodeAllowed() }
    }

    @Test func printIdentifierRejectsMalformedHex() {
        #expect(throws: AuthenticationError.self) { try PrintIdentifier(hex: "zz") }
        #expect(throws: AuthenticationError.self) { try PrintIdentifier(hex: String(repeating: "a", count: 30)) }
        #expect(
            (try? PrintIdentifier(hex: String(repeating: "0f", count: 16)))?.hex == String(repeating: "0f", count: 16))
    }
}
