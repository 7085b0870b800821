import Foundation
import SecurityProtocol
import SocketPeer
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "Caller identity": the daemon holds the connecting process (a pidfd) and the executable it ran, and serves
/// a connection only while that process still runs that executable.
@Suite("localauthd: who is calling", .serialized, .timeLimit(.minutes(2)))
struct PeerIdentityTests {
    /// Two programs built for the purpose: `probe-connect` connects and says hello, then either sends a request
    /// itself or executes `probe-send` (another executable) with the open connection, which sends it. The first is
    /// served; the second is refused, and its add never reaches the store.
    ///
    /// Run twice: with the kernel's process events (how localauthd runs as root), and with the full check of
    /// `/proc/<pid>/exe` on every request (`LA_PROCESS_EVENTS=0`, as where events are not delivered).
    @Test(arguments: [true, false])
    func aConnectionHandedToAnotherProgramByExecIsRefused(processEvents: Bool) async throws {
        let world = try DaemonWorld(extraEnvironment: processEvents ? [:] : ["LA_PROCESS_EVENTS": "0"])
        defer { world.close() }
        let probes = try PeerProbes(in: world.directory)
        let hello = ClientMessage.hello(versions: [1], accessGroups: ["probe"], allGroups: false)
        // Unregistered, the probes add to their private groups; the check below sees every group.
        func add(_ account: String) -> ClientMessage {
            .keychain(1, .add(genericPassword(account, data: "x")), .nonInteractive, interactive: false)
        }

        // The main socket, and the lane (its hot path), check the same way.
        for (socket, name) in [(world.daemon.socket, "main"), (world.daemon.socket + ".lane", "lane")] {
            let served = try probes.run(socket, hello, then: nil, add("served-\(name)"))
            #expect(served.welcome == .welcome(version: 1), "\(name)")
            #expect(served.answer == .keychain(1, .success), "the connecting program itself is served (\(name))")

            let handed = try probes.run(socket, hello, then: probes.send, add("handed-\(name)"))
            #expect(handed.welcome == .welcome(version: 1), "\(name)")
            guard case .refused(let reason)? = handed.answer else {
                Issue.record(
                    "the exec'd program was answered on the \(name) socket: \(String(describing: handed.answer))")
                continue
            }
            #expect(reason.contains("no longer runs"), "\(name)")

            let client = try world.daemon.client(accessGroups: [], allGroups: true)
            #expect(try await foundPassword(client, "served-\(name)") == "x")
            #expect(try await foundPassword(client, "handed-\(name)") == nil)
        }
    }

    /// The identity read for a process (here this test process, with a pidfd opened by pid, the fallback for
    /// kernels without `SO_PEERPIDFD`): its executable's path, and a SHA-256 equal to `sha256sum`'s of that file.
    @Test func aPeersExecutableIsItsPathAndDigest() throws {
        let peer = try PeerProcess(credentials: PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()), pidfd: -1)
        let path = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        #expect(peer.executable == path)
        #expect(peer.isCurrent)
        let summed = try runCapturingOutput(URL(fileURLWithPath: "/usr/bin/sha256sum"), [path])
        let expected = String(summed.output.prefix(64))
        let digest = try #require(peer.executableDigest())
        #expect(digest.map { String(format: "%02x", $0) }.joined() == expected)
        // A process that is gone cannot be identified.
        #expect(throws: PeerProcess.Unidentified.self) {
            try PeerProcess(credentials: PeerCredentials(pid: Int32.max - 1, uid: 0, gid: 0), pidfd: -1)
        }
    }

    /// A peer stops being current when it exits: already as a zombie nobody reaped (its pid still names it), and
    /// after it was reaped.
    @Test func anExitedPeerIsNotCurrent() throws {
        let child = try SpawnedProcess("/bin/sleep", ["30"])
        let peer = try PeerProcess(
            credentials: PeerCredentials(pid: child.pid, uid: getuid(), gid: getgid()), pidfd: -1)
        #expect(peer.isCurrent)
        kill(child.pid, SIGKILL)
        // A zombie until reaped: state Z in /proc/<pid>/stat.
        var zombie = false
        for _ in 0..<500 where !zombie {
            let stat = (try? String(contentsOfFile: "/proc/\(child.pid)/stat", encoding: .utf8)) ?? ""
            zombie = stat.split(separator: ")").last?.split(separator: " ").first == "Z"
            if !zombie { usleep(10_000) }
        }
        #expect(zombie, "the killed child became a zombie")
        #expect(!peer.isCurrent, "a zombie is not current")
        _ = child.wait(timeout: 10)
        #expect(!peer.isCurrent, "a reaped process is not current")
    }
}

/// Whether a subscription to the kernel's process events works here: the very call the daemon makes.
enum KernelProcessEvents {
    static let delivered = ProcessEvents() != nil
}

/// The kernel's process events, which spare localauthd a `/proc/<pid>/exe` lookup per request: an exec or exit of a
/// watched process marks it, nothing else does, and lost events mark every watched process. The tests run as root,
/// where the kernel delivers them, unless in a pid or network namespace of its own (then they are skipped, and
/// localauthd does the full check on every request, as `aConnectionHandedToAnotherProgramByExecIsRefused` covers
/// with `LA_PROCESS_EVENTS=0`).
@Suite(
    "localauthd: process events", .serialized, .timeLimit(.minutes(2)),
    .enabled(
        if: KernelProcessEvents.delivered,
        """
        the kernel delivers no process events here (a pid or network namespace of its own, or no CAP_NET_ADMIN): \
        localauthd then checks /proc/<pid>/exe on every request, as aConnectionHandedToAnotherProgramByExecIsRefused \
        shows with LA_PROCESS_EVENTS=0
        """))
struct ProcessEventsTests {
    /// Waits up to 5 s for the executable of `pid` to be `path`.
    static func runs(_ pid: pid_t, _ path: String) -> Bool {
        for _ in 0..<500 {
            if (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) == path { return true }
            usleep(10_000)
        }
        return false
    }

    /// Where events were lost meanwhile (a machine busy enough to fill the queue), every watched process is marked,
    /// as it must be, and "nothing else marks" cannot be seen; on a machine so slow that the shell executed before it
    /// was watched, the exec cannot be seen: the round is repeated, up to five times.
    @Test func anExecAndAnExitMarkTheProcessAndNothingElseDoes() throws {
        let events = try #require(ProcessEvents(), "the kernel delivers process events to root")
        var observed = false
        for _ in 0..<5 where !observed {
            observed = try Self.execAndExitRound(events)
        }
        #expect(observed, "five rounds in a row lost events")
    }

    /// One round of the test above: false when events were lost, so its observations do not count.
    static func execAndExitRound(_ events: ProcessEvents) throws -> Bool {
        let quiet = try SpawnedProcess("/bin/sleep", ["30"])
        let child = try SpawnedProcess("/bin/sh", ["-c", "sleep 1; exec /bin/sleep 30"])
        defer {
            kill(quiet.pid, SIGKILL)
            kill(child.pid, SIGKILL)
            _ = quiet.wait(timeout: 5)
            _ = child.wait(timeout: 5)
        }
        // The two spawns' own execs, reported before anyone watched. posix_spawn returns once the child's exec
        // has replaced its memory, which is a moment before the kernel queues the exec's event: so the two are
        // seen running their programs first, then drained.
        #expect(Self.runs(quiet.pid, "/usr/bin/sleep") || Self.runs(quiet.pid, "/bin/sleep"))
        let shell = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child.pid)/exe")) ?? ""
        usleep(50_000)
        events.drain()
        let watchedQuiet = events.watch(quiet.pid)
        let watchedChild = events.watch(child.pid)
        // The shell must still be the shell when watched (a machine slow enough to pass its `sleep 1` voids the round).
        let stillShell = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child.pid)/exe")) == shell
        guard stillShell, !shell.hasSuffix("/sleep") else {
            events.unwatch(watchedQuiet)
            events.unwatch(watchedChild)
            return false
        }
        defer {
            events.unwatch(watchedQuiet)
            events.unwatch(watchedChild)
        }
        // The shell forks its `sleep 0.3`, which execs and exits: events of another process.
        #expect(Self.runs(child.pid, "/usr/bin/sleep") || Self.runs(child.pid, "/bin/sleep"))
        if events.drain() { return false }
        #expect(watchedChild.takeStale(), "the exec was reported")
        #expect(!watchedChild.takeStale(), "and taken")
        #expect(!watchedQuiet.takeStale(), "a process that did nothing is not marked")
        kill(quiet.pid, SIGKILL)
        _ = quiet.wait(timeout: 5)
        if events.drain() { return false }
        #expect(watchedQuiet.takeStale(), "the exit was reported")
        #expect(!watchedChild.takeStale())
        return true
    }

    @Test func lostEventsMarkEveryWatchedProcess() throws {
        // A queue of a few events, filled by processes nobody drains.
        let events = try #require(ProcessEvents(receiveBuffer: 2_048))
        let quiet = try SpawnedProcess("/bin/sleep", ["30"])
        defer {
            kill(quiet.pid, SIGKILL)
            _ = quiet.wait(timeout: 5)
        }
        events.drain()
        let watched = events.watch(quiet.pid)
        defer { events.unwatch(watched) }
        #expect(!watched.takeStale())
        try Self.flood()
        events.drain()
        #expect(watched.takeStale(), "lost events mark every watched process")
        // The kernel reports a loss once until the queue is emptied: a drain reads it to the end, so the next loss
        // is reported too.
        try Self.flood()
        events.drain()
        #expect(watched.takeStale(), "a second loss marks them again")
    }

    /// Fifty short processes: far more events than a small queue holds.
    static func flood() throws {
        for _ in 0..<50 {
            let process = try SpawnedProcess("/bin/true", [])
            _ = process.wait(timeout: 5)
        }
    }
}

/// The two probe programs (Tests/Fixtures/PeerProbes), compiled with the toolchain's clang into `directory`.
struct PeerProbes {
    let connect: String
    let send: String

    init(in directory: String) throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/PeerProbes").standardized.path
        connect = directory + "/probe-connect"
        send = directory + "/probe-send"
        for (source, output) in [("probe-connect.c", connect), ("probe-send.c", send)] {
            let built = try runCapturingOutput(
                URL(fileURLWithPath: "/usr/bin/env"), ["clang", "-O1", "-o", output, sources + "/" + source])
            guard built.status == 0 else { throw ProbeFailure(description: "clang: \(built.output)") }
        }
    }

    struct ProbeFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `probe-connect` against `socket`: hello, then `request` sent by itself or by `then` after an exec; the
    /// two answers it printed, decoded (nil where the connection closed instead).
    func run(
        _ socket: String, _ hello: ClientMessage, then next: String?, _ request: ClientMessage
    ) throws -> (welcome: ServerMessage?, answer: ServerMessage?) {
        let result = try runCapturingOutput(
            URL(fileURLWithPath: connect), [socket, Self.hex(hello), next ?? "-", Self.hex(request)])
        guard result.status == 0 else { throw ProbeFailure(description: "probe-connect: \(result.output)") }
        let lines = result.output.split(separator: "\n").map(String.init)
        func decoded(_ index: Int) throws -> ServerMessage? {
            guard index < lines.count, lines[index] != "closed" else { return nil }
            return try ServerMessage(decoding: Self.bytes(lines[index]))
        }
        return (try decoded(0), try decoded(1))
    }

    static func hex(_ message: ClientMessage) -> String {
        message.encoded().withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }
}
