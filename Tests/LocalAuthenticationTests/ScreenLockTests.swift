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
/// only. Signals are sent with `dbus-send`, as logind would send them.
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

    @Test func theWatchedSessionsLockSignalLocksTheKeychainAndAnotherSessionsDoesNot() throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let bus = "unix:path=\(world.directory.path)/bus"
        let daemon = try SpawnedProcess(
            "/usr/bin/dbus-daemon",
            ["--config-file=/usr/share/dbus-1/session.conf", "--address=\(bus)", "--nofork"],
            log: world.directory.path + "/dbus.log")
        defer { _ = daemon.stop(SIGTERM) }
        #expect(eventually { FileManager.default.fileExists(atPath: world.directory.path + "/bus") })

        var environment = world.engine.subprocessEnvironment()
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus
        let log = world.directory.path + "/watcher.log"
        let watcher = try SpawnedProcess(
            try lactlExecutable().path, ["keychain", "lock-on-screen-lock", "--session", "2"],
            environment: environment, log: log)
        defer { _ = watcher.stop(SIGTERM) }
        func lockSignal(session path: String) throws {
            let (status, output) = try runCapturingOutput(
                URL(fileURLWithPath: "/usr/bin/dbus-send"),
                [
                    "--bus=\(bus)", "--type=signal", "/org/freedesktop/login1/session/\(path)",
                    "org.freedesktop.login1.Session.Lock",
                ])
            #expect(status == 0, "\(output)")
        }
        func unlock() throws {
            _ = try BlockingBridge.wait {
                try await world.client.send(
                    .unlockWithPasscode(EvaluationOptions(prompt: EvaluationPrompt(reason: "test"))),
                    presenter: FixedPasscodePresenter(passcode: "secret"))
            }
        }

        // The watcher is listening once a signal of session 2 locked the keychain: one signal, then up to 2 s for
        // it, so a loaded machine does not queue many; then until the watcher has handled every signal that
        // reached it (its log stops growing), so a late one cannot lock again after the unlock below.
        #expect(try !isLocked(world))
        var locked = false
        for _ in 0..<10 where !locked {
            try lockSignal(session: "_32")
            for _ in 0..<20 where !locked {
                usleep(100_000)
                locked = try isLocked(world)
            }
        }
        #expect(locked)
        func handledLocks() -> Int {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.components(separatedBy: "session/_32 locked its screen").count - 1
        }
        var handled = -1
        for _ in 0..<10 where handled != handledLocks() {
            handled = handledLocks()
            usleep(1_000_000)
        }
        try unlock()
        #expect(try !isLocked(world))
        // Session 1's lock, then session 2's: only the second locks (signals of one sender arrive in order, and
        // the log names each signal that locked).
        try lockSignal(session: "_31")
        try lockSignal(session: "_32")
        #expect(try eventually { try isLocked(world) })
        let logged = try String(contentsOfFile: log, encoding: .utf8)
        #expect(!logged.contains("session/_31 locked"), "\(logged)")
        #expect(logged.contains("session/_32 locked its screen: the keychain is locked."), "\(logged)")
    }

    @Test func withoutASessionOnlyTheUsersOwnSessionsLockAndAnotherUsersIsIgnored() throws {
        // The user unit's case: no --session, no $XDG_SESSION_ID. logind's records say session 7 is another user's
        // and session 8 this user's; session 9 has no record (counts, as locking is safe).
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let bus = "unix:path=\(world.directory.path)/bus"
        let daemon = try SpawnedProcess(
            "/usr/bin/dbus-daemon",
            ["--config-file=/usr/share/dbus-1/session.conf", "--address=\(bus)", "--nofork"],
            log: world.directory.path + "/dbus.log")
        defer { _ = daemon.stop(SIGTERM) }
        #expect(eventually { FileManager.default.fileExists(atPath: world.directory.path + "/bus") })
        let sessions = world.directory.path + "/sessions"
        try FileManager.default.createDirectory(atPath: sessions, withIntermediateDirectories: true)
        try "# This is private data. Do not parse.\nUID=\(getuid() + 1)\nUSER=someone\nACTIVE=1\n".write(
            toFile: sessions + "/7", atomically: true, encoding: .utf8)
        try "# This is private data. Do not parse.\nUID=\(getuid())\nUSER=me\nACTIVE=1\n".write(
            toFile: sessions + "/8", atomically: true, encoding: .utf8)

        var environment = world.engine.subprocessEnvironment()
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus
        environment["XDG_SESSION_ID"] = nil
        let log = world.directory.path + "/watcher.log"
        let watcher = try SpawnedProcess(
            try lactlExecutable().path, ["keychain", "lock-on-screen-lock", "--sessions-directory", sessions],
            environment: environment, log: log)
        defer { _ = watcher.stop(SIGTERM) }
        func lockSignal(session path: String) throws {
            let (status, output) = try runCapturingOutput(
                URL(fileURLWithPath: "/usr/bin/dbus-send"),
                [
                    "--bus=\(bus)", "--type=signal", "/org/freedesktop/login1/session/\(path)",
                    "org.freedesktop.login1.Session.Lock",
                ])
            #expect(status == 0, "\(output)")
        }
        func unlock() throws {
            _ = try BlockingBridge.wait {
                try await world.client.send(
                    .unlockWithPasscode(EvaluationOptions(prompt: EvaluationPrompt(reason: "test"))),
                    presenter: FixedPasscodePresenter(passcode: "secret"))
            }
        }

        // Another user's session, then this user's, until the watcher listens and this user's locks (signals of
        // one sender arrive in order, so every session 7 signal before it was handled first, and ignored).
        #expect(try !isLocked(world))
        var locked = false
        for _ in 0..<10 where !locked {
            try lockSignal(session: "_37")
            try lockSignal(session: "_38")
            for _ in 0..<20 where !locked {
                usleep(100_000)
                locked = try isLocked(world)
            }
        }
        #expect(locked)
        var logged = try String(contentsOfFile: log, encoding: .utf8)
        #expect(
            logged.contains("session/_37 locked its screen: another user's session (uid \(getuid() + 1)), ignored."),
            "\(logged)")
        #expect(!logged.contains("session/_37 locked its screen: the keychain is locked."), "\(logged)")
        #expect(logged.contains("session/_38 locked its screen: the keychain is locked."), "\(logged)")

        // Wait until every signal sent so far was handled, unlock, then another user's lock alone locks nothing,
        // and a session logind has no record of locks.
        func handled() -> Int {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.components(separatedBy: "\n").count
        }
        var count = -1
        for _ in 0..<10 where count != handled() {
            count = handled()
            usleep(1_000_000)
        }
        try unlock()
        try lockSignal(session: "_37")
        try lockSignal(session: "_39")
        #expect(try eventually { try isLocked(world) })
        logged = try String(contentsOfFile: log, encoding: .utf8)
        #expect(logged.contains("session/_39 locked its screen: the keychain is locked."), "\(logged)")
        #expect(!logged.contains("session/_37 locked its screen: the keychain is locked."), "\(logged)")
    }

    @Test func sessionIDsAreEscapedAsSystemdEscapesBusPaths() throws {
        // lactl's own escaping, checked through the command's filter: session "c2" is kept as is, "2" is `_32`.
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let bus = "unix:path=\(world.directory.path)/bus"
        let daemon = try SpawnedProcess(
            "/usr/bin/dbus-daemon",
            ["--config-file=/usr/share/dbus-1/session.conf", "--address=\(bus)", "--nofork"],
            log: world.directory.path + "/dbus.log")
        defer { _ = daemon.stop(SIGTERM) }
        #expect(eventually { FileManager.default.fileExists(atPath: world.directory.path + "/bus") })
        var environment = world.engine.subprocessEnvironment()
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus
        let watcher = try SpawnedProcess(
            try lactlExecutable().path, ["keychain", "lock-on-screen-lock", "--session", "c2"],
            environment: environment, log: world.directory.path + "/watcher.log")
        defer { _ = watcher.stop(SIGTERM) }
        #expect(
            try eventually {
                _ = try runCapturingOutput(
                    URL(fileURLWithPath: "/usr/bin/dbus-send"),
                    [
                        "--bus=\(bus)", "--type=signal", "/org/freedesktop/login1/session/c2",
                        "org.freedesktop.login1.Session.Lock",
                    ])
                return try isLocked(world)
            })
    }
}
