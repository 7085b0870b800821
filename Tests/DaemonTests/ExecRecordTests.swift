import AppRegistry
import Foundation
import SecurityProtocol
import SocketPeer
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// This process's own record, as localauthd keeps one, for the files the tests below copy; what it reports (an
/// exec not recorded, process events lost) is kept for the failures' messages.
private let testProcessExecRecord: ExecRecord? = try? ExecRecord { line in
    execRecordReports.withLock { $0.append(line) }
}
private let execRecordReports = Mutex<[String]>([])

/// Issue 47's last hole: a program that makes `/proc/<pid>/exe` name a registered app's file without exec'ing it
/// (`prctl(PR_SET_MM, PR_SET_MM_MAP)`), and then runs only code the integrity checks accept, was the app. The exec
/// record (``ExecRecord``) remembers which process exec'd which watched file, as the exec happens.
///
/// Serialized, and the only suite whose daemons keep the record: a thread has one tracer, so two records watching
/// one file (every world registers `lactl`) would contend for its execs.
@Suite(.serialized, .enabled(if: testProcessExecRecord != nil, "the exec record needs root (fanotify, ptrace)"))
struct ExecRecordTests {
    static var record: ExecRecord? { testProcessExecRecord }

    /// What the record reported so far, for a failure's message.
    static var reports: String {
        let lines = execRecordReports.withLock { $0 }
        return lines.isEmpty ? "the record reported nothing" : "the record reported: " + lines.joined(separator: "; ")
    }

    /// A copy of `/usr/bin/sleep` (or of `source`) in a directory of its own: a file no other record watches.
    ///
    /// The programs started below sleep an hour and are killed when their test ends: a test's polls are tasks of the
    /// cooperative pool, which other suites' blocking calls can hold for over a minute on a loaded 2-core machine,
    /// and a program that ended on its own meanwhile took its record with it (a minute's sleep did, twice).
    static func copy(_ source: String = "/usr/bin/sleep", in directory: String, as name: String) throws -> String {
        let path = directory + "/" + name
        try FileManager.default.copyItem(atPath: source, toPath: path)
        chmod(path, 0o755)
        return path
    }

    /// A shell's script that waits, staying the shell, until SIGTERM ends it and its child.
    static let sleepUntilTerminated = "sleep 3600 & trap \"kill $!; exit\" TERM; wait"

    static func scratch() throws -> String {
        var template = Array("/tmp/la-exec-record-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        chmod(made, 0o755)
        return String(cString: made)
    }

    static func file(_ path: String) throws -> (device: UInt64, inode: UInt64) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw CocoaError(.fileNoSuchFile) }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// The first line of `log` that starts with `prefix`, its rest as a number, within 30 s.
    static func number(after prefix: String, in log: String) async throws -> Int32 {
        var found: Int32?
        let seen = await waitUntil(within: .seconds(30)) {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            found = text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap {
                Int32($0.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces))
            }
            return found != nil
        }
        guard seen, let found else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "no '\(prefix)' in: \(text)"])
        }
        return found
    }

    /// A program started after its file was watched is recorded as having exec'd it; one running it already when
    /// the file was first watched is recorded as such; another file's program has no record of this one.
    @Test func anExecOfAWatchedFileIsRecordedAndNothingElseIs() async throws {
        let record = try #require(Self.record)
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.copy(in: directory, as: "app")
        let other = try Self.copy(in: directory, as: "other")
        // The early program says when it runs its own code (a copy of sh, which stays the process's program while
        // its child sleeps): its exec is over, and the kernel's event for it queued. /proc names the new file a moment
        // before that event; a watch between the two would take the exec for a later one.
        let shell = try Self.copy("/usr/bin/dash", in: directory, as: "early-app")
        let said = directory + "/early.log"
        let early = try SpawnedProcess(
            shell, ["-c", "echo running; exec 1>&-; \(Self.sleepUntilTerminated)"], log: said)
        defer { _ = early.stop() }
        let running = await waitUntil(within: .seconds(60)) {
            ((try? String(contentsOfFile: said, encoding: .utf8)) ?? "").contains("running")
                && (try? Self.runs(early.pid, shell)) == true
        }
        #expect(
            running,
            """
            the early program said: \((try? String(contentsOfFile: said, encoding: .utf8)) ?? "nothing"); it runs \
            \((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(early.pid)/exe")) ?? "nothing"), \
            state \((try? String(contentsOfFile: "/proc/\(early.pid)/stat", encoding: .utf8)) ?? "gone")
            """)
        #expect(record.watch([shell, app]).isEmpty)
        #expect(record.verdict(early.pid, runs: try Self.file(shell)) == .runningWhenWatched, "\(Self.reports)")

        // /proc names the app from the exec on, while the record is still being taken (the process held at its
        // first stop): the record is waited for.
        let late = try SpawnedProcess(app, ["3600"])
        defer { _ = late.stop(SIGKILL) }
        let file = try Self.file(app)
        #expect(
            await waitUntil(within: .seconds(30)) { record.verdict(late.pid, runs: file) == .executed },
            "\(Self.reports)")
        let unwatched = try SpawnedProcess(other, ["3600"])
        defer { _ = unwatched.stop(SIGKILL) }
        #expect(await waitUntil(within: .seconds(30)) { (try? Self.runs(unwatched.pid, other)) == true })
        #expect(record.verdict(unwatched.pid, runs: try Self.file(other)) == .notSeen)
        #expect(record.verdict(unwatched.pid, runs: try Self.file(app)) == .notSeen)
        // The record stays this process's: still there while it runs, gone with it.
        #expect(record.verdict(late.pid, runs: try Self.file(app)) == .executed)
        _ = late.stop(SIGKILL)
        #expect(record.verdict(late.pid, runs: try Self.file(app)) == .notSeen)
    }

    /// A process whose second thread execs the app (the kernel then gives that thread the process's id, and reports
    /// its stop under it) is recorded too.
    @Test func anExecByAThreadOtherThanTheFirstIsRecorded() async throws {
        let record = try #require(Self.record)
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.copy(in: directory, as: "app")
        #expect(record.watch([app]).isEmpty)
        let script = """
            import os, threading
            print("process", os.getpid(), flush=True)
            thread = threading.Thread(target=lambda: os.execv("\(app)", ["app", "3600"]))
            thread.start()
            thread.join()
            """
        let log = directory + "/threads.log"
        let program = try SpawnedProcess("/usr/bin/python3", ["-c", script], log: log)
        defer { _ = program.stop(SIGKILL) }
        let pid = try await Self.number(after: "process ", in: log)
        let file = try Self.file(app)
        #expect(
            await waitUntil(within: .seconds(30)) { record.verdict(pid, runs: file) == .executed },
            "\(Self.reports)")
    }

    /// A script whose `#!` line names the watched file: the kernel opens that interpreter, and sends its permission
    /// event, while the exec holds the lock a seize waits for. The exec goes on after a bounded wait, unrecorded,
    /// and later execs of the file are still recorded (a seize waited for on the record's own thread held up every
    /// exec of a watched file for good).
    @Test func aScriptNamingTheFileAsItsInterpreterHoldsUpNothing() async throws {
        let record = try #require(Self.record)
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.copy("/bin/dash", in: directory, as: "app-shell")
        #expect(record.watch([app]).isEmpty)
        let script = directory + "/interpreted"
        try "#!\(app)\necho interpreted $$\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let log = directory + "/script.log"
        // Started by a shell in the background: were the exec held for good, the test would see it, not hang.
        let starter = try SpawnedProcess("/bin/sh", ["-c", "\(script) &"], log: log)
        defer { _ = starter.stop(SIGKILL) }
        let interpreted = try await Self.number(after: "interpreted ", in: log)
        #expect(interpreted > 0)
        let file = try Self.file(app)
        #expect(record.verdict(interpreted, runs: file) != .executed, "the held-up exec is not recorded")
        let direct = try SpawnedProcess(app, ["-c", Self.sleepUntilTerminated])
        defer { _ = direct.stop() }
        #expect(
            await waitUntil(within: .seconds(30)) { record.verdict(direct.pid, runs: file) == .executed },
            "\(Self.reports)")
    }

    /// How the attack program comes to name the app's file.
    enum Swap: String, CaseIterable, Sendable {
        /// `PR_SET_MM_MAP` alone.
        case bare
        /// First an `execve` of the app that fails after the kernel opened the file (a bad argument vector), which
        /// fanotify reports like any exec of it.
        case afterAFailedExecOfTheApp
    }

    /// The attack program of issue 47 (Tests/Fixtures/ExeSwap) makes `/proc/<pid>/exe` name the app's file: the
    /// record says it never exec'd it — also when it let an exec of the app fail first, which fanotify's event
    /// alone would have counted.
    @Test(.needsUserNamespaces, .needsTheExeSwapProgram, arguments: Swap.allCases)
    func aProgramThatSetsItsExecutableToTheAppsHasNoRecordOfIt(_ swap: Swap) async throws {
        let record = try #require(Self.record)
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.copy(in: directory, as: "app")
        #expect(record.watch([app]).isEmpty)
        let swapper = try builtExeSwap(in: directory)
        let log = directory + "/swap.log"
        let attack = try SpawnedProcess(
            swapper, [app, "sleep"], environment: swap == .bare ? [:] : ["EXE_SWAP_FAILED_EXEC": "1"], log: log)
        defer { _ = attack.stop(SIGKILL) }
        let pid = try await Self.number(after: "swapped ", in: log)
        #expect(pid == attack.pid)
        #expect(try Self.runs(pid, app), "the kernel names the app's file as its executable")
        #expect(record.verdict(pid, runs: try Self.file(app)) == .notSeen)
    }

    /// A recorded app that execs another program in place (the same process) loses its record: the program it
    /// exec'd cannot then take the app's name by `PR_SET_MM_MAP`.
    @Test(.needsUserNamespaces, .needsTheExeSwapProgram)
    func anAppThatExecsAnotherProgramLosesItsRecord() async throws {
        let record = try #require(Self.record)
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.copy("/bin/dash", in: directory, as: "app-shell")
        #expect(record.watch([app]).isEmpty)
        let swapper = try builtExeSwap(in: directory)
        let log = directory + "/shell.log"
        let go = directory + "/go"
        let shell = try SpawnedProcess(
            app, ["-c", "echo shell $$; while [ ! -e \(go) ]; do sleep 0.05; done; exec \(swapper) \(app) sleep"],
            log: log)
        defer { _ = shell.stop(SIGKILL) }
        let pid = try await Self.number(after: "shell ", in: log)
        #expect(record.verdict(pid, runs: try Self.file(app)) == .executed, "the app, exec'd, is recorded")
        #expect(FileManager.default.createFile(atPath: go, contents: nil))
        #expect(try await Self.number(after: "swapped ", in: log) == pid, "the same process now runs exe-swap")
        #expect(try Self.runs(pid, app), "the kernel names the app's file as its executable again")
        #expect(record.verdict(pid, runs: try Self.file(app)) == .notSeen)
    }

    /// localauthd with its exec record: the attack program, whose `/proc/<pid>/exe` names the registered app's file,
    /// is served as unregistered, and the daemon's log says the record has no exec of the app by it (beside what
    /// the integrity checks find); the app itself, exec'd after the daemon watched its file, is the app.
    @Test(.needsUserNamespaces, .needsTheExeSwapProgram)
    func theDaemonServesAProgramWithoutAnExecOfTheAppAsUnregistered() throws {
        let world = try DaemonWorld(extraEnvironment: ["LA_EXEC_RECORD": "yes"])
        defer { world.close() }
        let app = try IdentityAttackTests.registeredApp(world)
        #expect(world.daemon.logText.contains("record=on"), "the daemon keeps the record")
        let swapper = try builtExeSwap(in: world.directory)
        let hello = ClientMessage.hello(versions: [1], accessGroups: ["TEAMV.vault"], allGroups: false)
        let result = try runCapturingOutput(
            URL(fileURLWithPath: swapper),
            [
                app.executable, world.daemon.socket, PeerProbes.hex(hello),
                PeerProbes.hex(.administration(1, .callerIdentity)),
            ], environment: inheritedEnvironment())
        let lines = result.output.split(separator: "\n").map(String.init)
        try #require(result.status == 0 && lines.count == 2, "the swapped program ran and was answered: \(result)")
        guard case .administration(1, .caller(let caller)) = try ServerMessage(decoding: PeerProbes.bytes(lines[1]))
        else {
            Issue.record("no caller identity: \(lines[1])")
            return
        }
        #expect(caller.executable == app.executable, "the kernel names the app's file as its executable")
        #expect(caller.applicationIdentifier == nil, "served as \(caller.applicationIdentifier ?? "")")
        #expect(!caller.accessGroups.contains("TEAMV.vault"))
        #expect(
            world.daemon.logText.contains("localauthd saw no exec of \(app.executable) by it"), "the reason is logged")
        #expect(try app.run(["read", "svc", "acct"])["value"] == "victim-secret", "the app itself still is")
        #expect(try app.run(["whoami"])["application"] == "TEAMV.victim")
    }

    /// Whether process `pid` runs the file at `path`, as `/proc/<pid>/exe` names it.
    static func runs(_ pid: Int32, _ path: String) throws -> Bool {
        var info = stat()
        guard stat("/proc/\(pid)/exe", &info) == 0 else { return false }
        let file = try Self.file(path)
        return UInt64(info.st_dev) == file.device && UInt64(info.st_ino) == file.inode
    }
}
