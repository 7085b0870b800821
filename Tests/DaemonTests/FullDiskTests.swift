import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The store's filesystem fills up (issue 39): localauthd's state directory on a 4 MiB tmpfs of the test's own.
@Suite("localauthd: a full disk", .serialized, .timeLimit(.minutes(3)))
struct FullDiskTests {
    /// Whether this process can mount a tmpfs (root, with the capability; a container may forbid it).
    static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("la-mount-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: probe) }
        guard mount("tmpfs", probe, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount(probe)
        return true
    }()

    /// Adds of 32 KiB values until the filesystem is full: the add that does not fit fails with `errSecDiskFull`
    /// (Apple's status for a full disk, -34), every item stored before is found with its value, the database's own
    /// check passes, and once space is freed adds work again.
    @Test(.enabled(if: canMount))
    func aFullDiskRefusesTheAddThatDoesNotFitAndLosesNothing() async throws {
        var template = Array("/tmp/la-full-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = directory + "/daemon-state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        #expect(mount("tmpfs", state, "tmpfs", 0, "size=4m,mode=0700") == 0)
        defer { umount2(state, Int32(MNT_DETACH)) }
        // A filler the test removes later, to free space.
        let filler = state + "/filler"
        #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: 512 << 10)))
        let daemon = try DaemonProcess(directory: directory)
        defer { if daemon.isRunning { daemon.stop() } }
        let client = try daemon.client()

        var stored: [Int] = []
        var failure: KeychainStatus?
        for index in 0..<400 where failure == nil {
            do {
                _ = try await client.send(.add(Self.item(index)))
                stored.append(index)
            } catch let status as KeychainStatus {
                failure = status
            }
        }
        #expect(failure?.code == .diskFull, "\(String(describing: failure))")
        #expect(stored.count > 10, "some items fit before the disk filled")
        // Nothing stored is lost or damaged.
        for index in stored {
            var query = Self.item(index)
            query["v_Data"] = nil
            query["r_Data"] = .bool(true)
            guard case .items(let found) = try await client.send(.copyMatching(query)),
                let data = found.items.first?.data
            else {
                Issue.record("item \(index) is missing")
                continue
            }
            #expect(data.unprotectedData() == Self.value(index), "item \(index) keeps its value")
        }
        // Space freed: adds work again.
        try FileManager.default.removeItem(atPath: filler)
        _ = try await client.send(.add(Self.item(1_000)))
        daemon.stop()
        let check = try await runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/sqlite3"),
            [try Self.database(under: state), "PRAGMA integrity_check;"])
        #expect(check.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(check.output)")
    }

    static func value(_ index: Int) -> Data {
        Data((0..<(32 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
    }

    static func item(_ index: Int) -> [String: KeychainValue] {
        [
            "class": .string("genp"), "svce": .string("full"), "acct": .string("item-\(index)"),
            "v_Data": .secret(SecureBytes(Array(value(index)))),
        ]
    }

    /// The store's database file under `state`.
    static func database(under state: String) throws -> String {
        let enumerator = FileManager.default.enumerator(atPath: state)
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix("keychain.db") { return state + "/" + path }
        }
        throw CocoaError(.fileNoSuchFile)
    }
}
