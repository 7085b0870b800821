import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// localauthd killed again and again under writers (issue 39): four client processes (`keychain-stress
/// through-crashes`) add items through a real daemon while the test SIGKILLs it and starts a new one on the same
/// store, 24 times. Clients are not restarted: a request in flight when the daemon dies fails with
/// errSecNotAvailable, and the client's next request connects to the new daemon by itself (no socket activation
/// here; under systemd the socket unit holds the socket, so connections made meanwhile wait instead of failing).
@Suite("localauthd: killed under writers", .serialized, .timeLimit(.minutes(4)))
struct CrashConsistencyTests {
    static let rounds = 24
    static let writers = 4

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")))
    func everyAnsweredAddSurvivesAndNothingUnansweredIsHalfThere() async throws {
        var template = Array("/tmp/la-crash-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var daemon = try DaemonProcess(directory: directory)
        let stopFile = directory + "/stop"
        let stress = try builtExecutable("keychain-stress").path
        let writers = try (0..<Self.writers).map { writer in
            try SpawnedProcess(
                stress, ["through-crashes", daemon.socket, "w\(writer)", stopFile],
                log: directory + "/writer-\(writer).log")
        }
        defer { for writer in writers where writer.isRunning { writer.stop(SIGKILL) } }

        for round in 0..<Self.rounds {
            // Between 100 and 400 ms of writes, then the kill: most rounds land in the middle of a transaction.
            usleep(useconds_t(100_000 + (round &* 37_813) % 300_000))
            let killed = daemon.stop(SIGKILL)
            #expect(killed.bySignal, "round \(round): the daemon was killed, not stopped")
            daemon = try DaemonProcess(directory: directory)
        }
        usleep(300_000)
        #expect(FileManager.default.createFile(atPath: stopFile, contents: nil))
        for (index, writer) in writers.enumerated() {
            let exit = await writer.wait(timeout: 60)
            let log = (try? String(contentsOfFile: directory + "/writer-\(index).log", encoding: .utf8)) ?? ""
            #expect(exit?.status == 0 && exit?.bySignal == false, "writer \(index): \(log.suffix(500))")
        }

        var answered: [String: Int] = [:]
        var unanswered: [String: Int] = [:]
        for writer in 0..<Self.writers {
            let log = try String(contentsOfFile: directory + "/writer-\(writer).log", encoding: .utf8)
            for line in log.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count >= 2, let index = Int(fields[1]) else { continue }
                switch fields[0] {
                case "added": answered["w\(writer)-\(index)"] = index
                case "failed":
                    unanswered["w\(writer)-\(index)"] = index
                    #expect(fields.count == 3 && fields[2] == "-25291", "a clear errSecNotAvailable: \(line)")
                default: Issue.record("writer \(writer) printed \(line)")
                }
            }
        }
        #expect(answered.count > 200, "writes happened between kills: \(answered.count)")
        #expect(unanswered.count >= Self.rounds, "every kill failed a request in flight or a connection")

        let client = try daemon.client(accessGroups: ["stress"])
        var missing: [String] = []
        for (account, index) in answered where try await Self.value(account, client) != Self.crashValue(index) {
            missing.append(account)
        }
        #expect(missing.isEmpty, "answered adds lost or changed: \(missing.sorted().prefix(10))")
        // An add whose answer never came is there whole or not at all.
        var committedUnanswered = 0
        for (account, index) in unanswered {
            switch try await Self.lookUp(account, client) {
            case .absent: break
            case .present(let value):
                #expect(value == Self.crashValue(index), "\(account) is there with another value")
                committedUnanswered += 1
            case .failed(let status): Issue.record("\(account) is half there: \(status)")
            }
        }
        // Nothing is there that no writer tried.
        guard case .items(let all) = try await client.send(.copyMatching(Self.everyItem)) else { return }
        let listed = Set(all.items.compactMap { $0.attributes?["acct"]?.stringValue })
        #expect(listed.subtracting(answered.keys).subtracting(unanswered.keys).isEmpty)
        #expect(listed.count == answered.count + committedUnanswered)
        daemon.stop()

        let check = try await runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/sqlite3"),
            [daemon.stateDirectory + "/0/keychain.db", "PRAGMA integrity_check;"])
        #expect(check.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(check.output)")
        print(
            "crash consistency: \(Self.rounds) kills, \(answered.count) answered adds all present, "
                + "\(unanswered.count) unanswered "
                + "(\(committedUnanswered) committed whole, the rest absent), integrity_check ok")
    }

    /// The value `keychain-stress through-crashes` gives item `index`.
    static func crashValue(_ index: Int) -> Data {
        let count = 16 + (index &* 7_919) % (24 << 10)
        return Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ index) })
    }

    static let everyItem: [String: KeychainValue] = [
        "class": .string("genp"), "svce": .string("crash"), "m_Limit": .string("m_LimitAll"),
        "r_Attributes": .bool(true),
    ]

    enum Lookup {
        case absent
        case present(Data)
        case failed(KeychainStatus)
    }

    static func lookUp(_ account: String, _ client: SocketClient) async throws -> Lookup {
        let query: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("crash"), "acct": .string(account), "r_Data": .bool(true),
        ]
        do {
            guard case .items(let found) = try await client.send(.copyMatching(query)),
                let data = found.items.first?.data
            else { return .absent }
            return .present(data.unprotectedData())
        } catch let status as KeychainStatus where status.code == .itemNotFound {
            return .absent
        } catch let status as KeychainStatus {
            return .failed(status)
        }
    }

    static func value(_ account: String, _ client: SocketClient) async throws -> Data? {
        if case .present(let value) = try await lookUp(account, client) { return value }
        return nil
    }
}
