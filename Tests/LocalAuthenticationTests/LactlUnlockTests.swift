import Foundation
import SecurityClient
import SecurityServer
import Synchronization
import Testing

/// `lactl` built next to the test bundle.
private func lactlExecutable() throws -> URL {
    var directory = Bundle.main.bundleURL
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("lactl")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    let fromExecutable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [fromExecutable, fromExecutable.deletingLastPathComponent()] {
        let path = candidate.appendingPathComponent("lactl")
        if FileManager.default.isExecutableFile(atPath: path.path) { return path }
    }
    throw CocoaError(.fileNoSuchFile)
}

/// Runs `lactl <command>` on a pty with `world`'s store, PAM service and reader, typing `keys` once the passcode
/// prompt shows (at once when `keys` is nil and `LA_PRESENTER=none`); returns the exit status and everything the
/// terminal showed.
func runLactlOnTerminal(
_ command: String, world: LocalAuthenticationWorld, typing keys: String?, readerDrivers: String = "no_such_driver"
) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
    process.arguments = ["-qec", try lactlExecutable().path + " " + command, "/dev/null"]
    var environment = ProcessInfo.processInfo.environment
    environment["LA_DATA_DIR"] = world.directory.path + "/store"
    environment["LA_PAM_SERVICE"] = LocalAuthenticationWorld.service
    environment["LA_PAM_CONFDIR"] = world.directory.path
    environment["LA_READER_DRIVERS"] = readerDrivers
    environment["LA_PRESENTER"] = keys == nil ? "none" : nil
    process.environment = environment
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    let shown = Mutex("")
    output.fileHandleForReading.readabilityHandler = { handle in
        let text = String(decoding: handle.availableData, as: UTF8.self)
        shown.withLock { $0 += text }
    }
    try process.run()
    let deadline = Date().addingTimeInterval(20)
    if let keys {
        while !shown.withLock({ $0.contains("Password:") }) && Date() < deadline { usleep(20_000) }
        usleep(100_000)
        input.fileHandleForWriting.write(Data(keys.utf8))
    }
    process.waitUntilExit()
    output.fileHandleForReading.readabilityHandler = nil
    return (process.terminationStatus, shown.withLock { $0 })
}


/// `lactl keychain unlock` on a real pseudo-terminal (util-linux `script`): the terminal presenter reads the
/// passcode from `/dev/tty` with echo off and PAM (pam_matrix) checks it.
@Suite("lactl keychain unlock through PAM on a terminal", .serialized)
struct LactlUnlockTests {
    func unlock(world: LocalAuthenticationWorld, typing keys: String) throws -> (Int32, String) {
        try runLactlOnTerminal("keychain unlock", world: world, typing: keys)
    }

    @Test func theRightPasscodeUnlocksAndCtrlCOrAWrongOneDoesNot() throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        func isLocked() throws -> Bool {
            guard case .locked(let locked) = try world.client.send(.lockState) else { return false }
            return locked
        }
        _ = try world.client.send(.lock)
        let (cancelled, cancelledScreen) = try unlock(world: world, typing: "\u{03}")
        #expect(cancelled != 0)
        #expect(try isLocked())
        #expect(cancelledScreen.contains("Unlock the keychain"))

        let (wrong, _) = try unlock(world: world, typing: "guess\r")
        #expect(wrong != 0)
        #expect(try isLocked())

        let (accepted, screen) = try unlock(world: world, typing: "secret\r")
        #expect(accepted == 0)
        #expect(!screen.contains("secret"))
        #expect(try isLocked() == false)
    }
}

/// Finding 5 of the attack review, as a person would try it: `lactl biometry enroll` added a finger without any
/// authentication. Now it asks for the passcode first; no terminal or a wrong passcode enrolls nothing.
@Suite("lactl biometry enroll needs the passcode", .serialized, .virtualReaderLock)
struct LactlEnrollmentTests {
    @Test func enrollingWithoutTheRightPasscodeAddsNoFinger() async throws {
        let world = try LocalAuthenticationWorld(user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let (silent, silentScreen) = try runLactlOnTerminal(
            "biometry enroll --finger left-index", world: world, typing: nil, readerDrivers: "virtual_device")
        #expect(silent != 0)
        #expect(silentScreen.contains("passcode"))
        let (wrong, _) = try runLactlOnTerminal(
            "biometry enroll --finger left-index", world: world, typing: "guess\r", readerDrivers: "virtual_device")
        #expect(wrong != 0)
        #expect(try world.contexts.biometric.enrolledPrints().isEmpty)
        #expect(try world.contexts.attemptPolicy.currentState().passcodeFailures == 1, "the wrong passcode counted")
        await world.close()
    }

    /// With the passcode typed on its terminal, `lactl biometry enroll` enrolls through the engine's enrollment
    /// request (scans from the virtual reader), and `lactl biometry list` shows the print.
    @Test func theRightPasscodeEnrollsAndListShowsIt() async throws {
        let world = try LocalAuthenticationWorld(user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let scans = Task { try await world.socket.send(Array(repeating: "SCAN finger-1", count: 5)) }
        let (enrolled, screen) = try runLactlOnTerminal(
            "biometry enroll --finger left-index", world: world, typing: "secret\r", readerDrivers: "virtual_device")
        try await scans.value
        #expect(enrolled == 0, "\(screen)")
        #expect(screen.contains("Enrolled left-index as "))
        #expect(!screen.contains("secret"))
        let (listed, list) = try runLactlOnTerminal(
            "biometry list", world: world, typing: nil, readerDrivers: "virtual_device")
        #expect(listed == 0)
        #expect(list.contains("left-index") && list.contains("state hash: "))
        await world.close()
    }
}
