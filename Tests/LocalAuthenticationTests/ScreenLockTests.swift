import Authenticators
import Foundation
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl keychain lock-on-screen-lock` (the user unit's command) against a real D-Bus daemon standing in for the
/// system bus: logind's `org.freedesktop.login1.Session.Lock` signal locks the keychain, for the watched session
/// only. logind is stood in for by a small python3-dbus program that owns `org.freedesktop.login1` on that bus and
/// sends the signals; `dbus-send`, which owns no such name, plays a local user forging one.
@Suite("lactl keychain lock-on-screen-lock on a real bus", .serialized, .virtualReaderLock)
struct ScreenLockTests {
    func isLocked(_ world: LocalAuthenticationWorld) throws -> Bool {
        guard case .locked(let locked) = try world.client.sendBlocking(.lockState) else { return false }
        return locked
    }

    /// Polls `condition` for up to 10 s.
    func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
        for _ in 0..<100 {
            if try condition() { return true }
            usleep(100_000)
        }
        return try condition()
    }

    /// A private bus, logind's stand-in on it, and the watcher (`lactl keychain lock-on-screen-lock arguments`).
    final class Bus {
        let world: LocalAuthenticationWorld
        let address: String
        let log: String
        private let daemon: SpawnedProcess
        private let logind = Process()
        private let logindInput = Pipe()
        private let logindOutput = Pipe()
        private var watcher: SpawnedProcess?

        init(_ world: LocalAuthenticationWorld) throws {
            self.world = world
            address = "unix:path=\(world.directory.path)/bus"
            log = world.directory.path + "/watcher.log"
            daemon = try SpawnedProcess(
                "/usr/bin/dbus-daemon",
                ["--config-file=/usr/share/dbus-1/session.conf", "--address=\(address)", "--nofork"],
                log: world.directory.path + "/dbus.log")
            for _ in 0..<100 where !FileManager.default.fileExists(atPath: world.directory.path + "/bus") {
                usleep(100_000)
            }
            // logind's stand-in: owns logind's name, then sends Session.Lock on each path it reads, one line each.
            logind.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            logind.arguments = [
                "-c",
                """
                import sys, dbus, dbus.lowlevel
                bus = dbus.bus.BusConnection(sys.argv[1])
                assert bus.request_name("org.freedesktop.login1") == dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER
                print("ready", flush=True)
                for line in sys.stdin:
                    bus.send_message(dbus.lowlevel.SignalMessage(
                        line.strip(), "org.freedesktop.login1.Session", "Lock"))
                    bus.flush()
                    print("sent", flush=True)
                """,
                address,
            ]
            logind.standardInput = logindInput
            logind.standardOutput = logindOutput
            try logind.run()
            #expect(readLine() == "ready")
        }

        deinit {
            _ = watcher?.stop(SIGTERM)
            // Killed, not sent end-of-file (children spawned meanwhile, here or by parallel tests, may hold the
            // pipe's writing end) and not sent SIGTERM (Foundation's Process hands the test runner's blocked signals
            // on to the child).
            kill(logind.processIdentifier, SIGKILL)
            logind.waitUntilExit()
            _ = daemon.stop(SIGTERM)
        }

        private func readLine() -> String {
            var line = Data()
            while true {
                let byte = logindOutput.fileHandleForReading.readData(ofLength: 1)
                if byte.isEmpty || byte == Data("\n".utf8) { break }
                line += byte
            }
            return String(decoding: line, as: UTF8.self)
        }

        func watch(_ arguments: [String], sessionID: String? = nil) throws {
            var environment = world.engine.subprocessEnvironment()
            environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
            environment["XDG_SESSION_ID"] = sessionID
            watcher = try SpawnedProcess(
                try lactlExecutable().path, ["keychain", "lock-on-screen-lock"] + arguments, environment: environment,
                log: log)
        }

        /// logind's Lock of the session whose bus path ends in `path` (escaped: `_32` is session "2").
        func logindLock(_ path: String) {
            logindInput.fileHandleForWriting.write(Data("/org/freedesktop/login1/session/\(path)\n".utf8))
            #expect(readLine() == "sent")
        }

        /// The same signal from a local user who is not logind.
        func forgedLock(_ path: String) throws {
            let (status, output) = try runCapturingOutput(
                URL(fileURLWithPath: "/usr/bin/dbus-send"),
                [
                    "--bus=\(address)", "--type=signal", "/org/freedesktop/login1/session/\(path)",
                    "org.freedesktop.login1.Session.Lock",
                ])
            #expect(status == 0, "\(output)")
        }

        var logged: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

        /// How many times the watcher logged `text`.
        func count(_ text: String) -> Int { logged.components(separatedBy: text).count - 1 }

        /// Sends `path`'s Lock until the watcher listens and the keychain is locked: one signal, then up to 2 s
        /// for it, so a loaded machine does not queue many; then until the watcher has handled every signal that
        /// reached it (its log stops growing), so a late one cannot lock again after the test unlocks.
        func lockWhenListening(_ path: String, after other: String? = nil) throws -> Bool {
            var locked = false
            for _ in 0..<10 where !locked {
                if let other { logindLock(other) }
                logindLock(path)
                for _ in 0..<20 where !locked {
                    usleep(100_000)
                    locked = try isLocked()
                }
            }
            var lines = -1
            for _ in 0..<10 where lines != count("\n") {
                lines = count("\n")
                usleep(1_000_000)
            }
            return locked
        }

        func isLocked() throws -> Bool {
            guard case .locked(let locked) = try world.client.sendBlocking(.lockState) else { return false }
            return locked
        }

        func unlock() throws {
            let world = world
            _ = try BlockingBridge.wait {
                try await world.client.send(
                    .unlockWithPasscode(EvaluationOptions(prompt: EvaluationPrompt(reason: "test"))),
                    presenter: FixedPasscodePresenter(passcode: "secret"))
            }
        }
    }

    @Test func theWatchedSessionsLockSignalLocksTheKeychainAndAnotherSessionsDoesNot() throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let bus = try Bus(world)
        try bus.watch(["--session", "2"])
        #expect(try !bus.isLocked())
        #expect(try bus.lockWhenListening("_32"))
        try bus.unlock()
        #expect(try !bus.isLocked())
        // Session 1's lock, then session 2's: only the second locks (signals of one sender arrive in order, and
        // the log names each signal that locked).
        bus.logindLock("_31")
        bus.logindLock("_32")
        #expect(try eventually { try bus.isLocked() })
        #expect(!bus.logged.contains("session/_31 locked"), "\(bus.logged)")
        #expect(bus.logged.contains("session/_32 locked its screen: the keychain is locked."), "\(bus.logged)")
    }

    @Test func withoutASessionOnlyTheUsersOwnSessionsLockAndAnotherUsersIsIgnored() throws {
        // The user unit's case: no --session, no $XDG_SESSION_ID. logind's records say session 7 is another user's
        // and session 8 this user's; session 9 has no record (counts, as locking is safe).
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let sessions = world.directory.path + "/sessions"
        try FileManager.default.createDirectory(atPath: sessions, withIntermediateDirectories: true)
        try "# This is private data. Do not parse.\nUID=\(getuid() + 1)\nUSER=someone\nACTIVE=1\n".write(
            toFile: sessions + "/7", atomically: true, encoding: .utf8)
        try "# This is private data. Do not parse.\nUID=\(getuid())\nUSER=me\nACTIVE=1\n".write(
            toFile: sessions + "/8", atomically: true, encoding: .utf8)
        let bus = try Bus(world)
        try bus.watch(["--sessions-directory", sessions])

        // Another user's session, then this user's, until the watcher listens and this user's locks. The watcher may
        // begin listening between the two signals of one round, so session 7 signals once more, now that it surely
        // listens: that one is ignored.
        #expect(try !bus.isLocked())
        #expect(try bus.lockWhenListening("_38", after: "_37"))
        let ignored = "session/_37 locked its screen: another user's session (uid \(getuid() + 1)), ignored."
        bus.logindLock("_37")
        #expect(eventually { bus.logged.contains(ignored) }, "\(bus.logged)")
        #expect(!bus.logged.contains("session/_37 locked its screen: the keychain is locked."), "\(bus.logged)")
        #expect(bus.logged.contains("session/_38 locked its screen: the keychain is locked."), "\(bus.logged)")

        // A local user forging logind's signal for this user's own session is not heard: after the forgery, a
        // genuine signal of session 7 is handled (and ignored), and nothing locked.
        try bus.unlock()
        let ownLocks = bus.count("session/_38 locked its screen: the keychain is locked.")
        let ignoredBefore = bus.count(ignored)
        try bus.forgedLock("_38")
        bus.logindLock("_37")
        #expect(eventually { bus.count(ignored) == ignoredBefore + 1 }, "\(bus.logged)")
        #expect(try !bus.isLocked())
        #expect(bus.count("session/_38 locked its screen: the keychain is locked.") == ownLocks, "\(bus.logged)")

        // Another user's lock alone locks nothing; a session logind has no record of locks.
        bus.logindLock("_37")
        bus.logindLock("_39")
        #expect(try eventually { try bus.isLocked() })
        #expect(bus.logged.contains("session/_39 locked its screen: the keychain is locked."), "\(bus.logged)")
        #expect(!bus.logged.contains("session/_37 locked its screen: the keychain is locked."), "\(bus.logged)")
    }

    @Test func sessionIDsAreEscapedAsSystemdEscapesBusPaths() throws {
        // lactl's own escaping, checked through the command's filter: session "c2" is kept as is, "2" is `_32`.
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let bus = try Bus(world)
        try bus.watch(["--session", "c2"])
        #expect(try bus.lockWhenListening("c2"))
    }
}
