import Authenticators
import Foundation
import SecurityClient
import SecurityServer
import Synchronization
import TestSupport
import Testing

/// Runs `lactl <command>` on a pty with `world`'s store, PAM service and reader, typing `keys` once the passcode
/// prompt shows (at once when `keys` is nil and `LA_PRESENTER=none`); returns the exit status and everything the
/// terminal showed. It runs on a thread of its own: a test's scans, sent by a task meanwhile, need the cooperative
/// pool's threads.
func runLactlOnTerminal(
    _ command: String, world: LocalAuthenticationWorld, typing keys: String?, readerDrivers: String = "no_such_driver"
) async throws -> (Int32, String) {
    var environment = world.engine.subprocessEnvironment()
    if world.engine.mode == .embedded {
        if readerDrivers == "virtual_device" {
            environment.merge(world.reader.environment) { $1 }
        } else {
            environment["LA_BIOMETRY_BACKEND"] = "libfprint"
            environment["LA_READER_DRIVERS"] = readerDrivers
        }
    }
    environment["LA_PRESENTER"] = keys == nil ? "none" : nil
    let program = try lactlExecutable().path + " " + command
    let answers = keys.map { [("Password:", $0)] } ?? []
    let finalEnvironment = environment
    return try await onOwnThread { try runOnTerminal(program, environment: finalEnvironment, answering: answers) }
}

/// `lactl keychain unlock` on a real pseudo-terminal (util-linux `script`): the terminal presenter reads the
/// passcode from `/dev/tty` with echo off and PAM (pam_matrix) checks it.
@Suite("lactl keychain unlock through PAM on a terminal", .serialized)
struct LactlUnlockTests {
    func isLocked(_ world: LocalAuthenticationWorld) throws -> Bool {
        guard case .locked(let locked) = try world.client.sendBlocking(.lockState) else { return false }
        return locked
    }

    func unlock(world: LocalAuthenticationWorld, typing keys: String) async throws -> (Int32, String) {
        try await runLactlOnTerminal("keychain unlock", world: world, typing: keys)
    }

    @Test func theRightPasscodeUnlocksAndCtrlCOrAWrongOneDoesNot() async throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        _ = try world.client.sendBlocking(.lock)
        let (cancelled, cancelledScreen) = try await unlock(world: world, typing: "\u{03}")
        #expect(cancelled != 0)
        #expect(try isLocked(world))
        #expect(cancelledScreen.contains("Unlock the keychain"))

        let (wrong, _) = try await unlock(world: world, typing: "guess\r")
        #expect(wrong != 0)
        #expect(try isLocked(world))

        let (accepted, screen) = try await unlock(world: world, typing: "secret\r")
        #expect(accepted == 0)
        #expect(!screen.contains("secret"))
        #expect(try isLocked(world) == false)
    }

    /// `lactl passcode verify` checks through the PAM service and directory the environment names (`LA_PAM_SERVICE`,
    /// `LA_PAM_CONFDIR`, as `lactl status` reports them); before, it always used /etc/pam.d/local-authentication.
    @Test func passcodeVerifyUsesTheEnvironmentsPAMService() async throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let (wrong, wrongScreen) = try await runLactlOnTerminal("passcode verify", world: world, typing: "guess\r")
        #expect(wrong != 0, "\(wrongScreen)")
        #expect(!wrongScreen.contains("passcode accepted"), "\(wrongScreen)")
        let (right, screen) = try await runLactlOnTerminal("passcode verify", world: world, typing: "secret\r")
        #expect(right == 0, "\(screen)")
        #expect(screen.contains("passcode accepted"), "\(screen)")
    }

    /// `lactl keychain lock` says when the lock protects nothing yet (the keychain not sealed under the passcode),
    /// and says nothing of the kind once a passcode unlock sealed it.
    @Test func lockSaysWhenTheKeychainIsNotYetSealedUnderThePasscode() async throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let (unsealed, unsealedScreen) = try await runLactlOnTerminal("keychain lock", world: world, typing: nil)
        #expect(unsealed == 0, "\(unsealedScreen)")
        #expect(unsealedScreen.contains("not yet sealed under the passcode"), "\(unsealedScreen)")
        #expect(try isLocked(world))

        let (accepted, screen) = try await unlock(world: world, typing: "secret\r")  // seals under "secret"
        #expect(accepted == 0, "\(screen)")
        let (sealed, sealedScreen) = try await runLactlOnTerminal("keychain lock", world: world, typing: nil)
        #expect(sealed == 0, "\(sealedScreen)")
        #expect(!sealedScreen.contains("not yet sealed"), "\(sealedScreen)")
        #expect(try isLocked(world))
    }

    /// The account's passcode changed with `passwd` (here: pam_matrix's file): `lactl passcode changed` asks for
    /// the new passcode, then once for the previous one, and re-seals the keychain under the new one.
    @Test func passcodeChangedResealsUnderTheNewPasscode() async throws {
        let world = try LocalAuthenticationWorld(reader: false, user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let user = TestEngine.username(preferring: AuthenticationConfiguration.currentUsername())
        let (first, firstScreen) = try await unlock(world: world, typing: "secret\r")  // seals under "secret"
        #expect(first == 0, "\(firstScreen)")
        _ = try world.client.sendBlocking(.lock)
        try MatrixPAM.writeService(
            LocalAuthenticationWorld.service, in: world.directory.path, users: [(user, "renewed")])

        let command = try lactlExecutable().path + " passcode changed"
        var environment = world.engine.subprocessEnvironment()
        if world.engine.mode == .embedded { environment["LA_READER_DRIVERS"] = "no_such_driver" }
        let (wrong, wrongScreen) = try runOnTerminal(
            command, environment: environment,
            answering: [("Password:", "renewed\r"), ("Previous passcode:", "guess\r")])
        #expect(wrong != 0, "\(wrongScreen)")
        #expect(wrongScreen.contains("The keychain stays locked"), "\(wrongScreen)")
        #expect(try isLocked(world))

        let (changed, screen) = try runOnTerminal(
            command, environment: environment,
            answering: [("Password:", "renewed\r"), ("Previous passcode:", "secret\r")])
        #expect(changed == 0, "\(screen)")
        #expect(screen.contains("sealed under the current passcode"), "\(screen)")
        #expect(!screen.contains("renewed") && !screen.contains("secret"))
        #expect(try isLocked(world) == false)

        // From now on the new passcode alone unlocks.
        _ = try world.client.sendBlocking(.lock)
        let (again, againScreen) = try await unlock(world: world, typing: "renewed\r")
        #expect(again == 0, "\(againScreen)")
        #expect(!againScreen.contains("Previous passcode"))
        #expect(try isLocked(world) == false)
    }
}

/// Finding 5 of the attack review, as a person would try it: `lactl biometry enroll` added a finger without any
/// authentication. Now it asks for the passcode first; no terminal or a wrong passcode enrolls nothing.
@Suite("lactl biometry enroll needs the passcode", .serialized, .virtualReaderLock)
struct LactlEnrollmentTests {
    @Test func enrollingWithoutTheRightPasscodeAddsNoFinger() async throws {
        let world = try LocalAuthenticationWorld(user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let (silent, silentScreen) = try await runLactlOnTerminal(
            "biometry enroll --finger left-index", world: world, typing: nil, readerDrivers: "virtual_device")
        #expect(silent != 0)
        #expect(silentScreen.contains("passcode"))
        let (wrong, _) = try await runLactlOnTerminal(
            "biometry enroll --finger left-index", world: world, typing: "guess\r", readerDrivers: "virtual_device")
        #expect(wrong != 0)
        #expect(try await enrolledPrints(world.client).isEmpty)
        if let contexts = world.embeddedContexts {
            #expect(try contexts.attemptPolicy.currentState().passcodeFailures == 1, "the wrong passcode counted")
        }
        await world.close()
    }

    /// With the passcode typed on its terminal, `lactl biometry enroll` enrolls through the engine's enrollment
    /// request (scans from the virtual reader), and `lactl biometry list` shows the print.
    @Test func theRightPasscodeEnrollsAndListShowsIt() async throws {
        let world = try LocalAuthenticationWorld(user: AuthenticationConfiguration.currentUsername())
        defer { world.directory.remove() }
        let scans = Task { try await world.socket.send(Array(repeating: "SCAN finger-1", count: 5)) }
        let (enrolled, screen) = try await runLactlOnTerminal(
            "biometry enroll --finger left-index", world: world, typing: "secret\r", readerDrivers: "virtual_device")
        _ = try await scans.value
        #expect(enrolled == 0, "\(screen)")
        #expect(screen.contains("Enrolled left-index as "))
        #expect(!screen.contains("secret"))
        let (listed, list) = try await runLactlOnTerminal(
            "biometry list", world: world, typing: nil, readerDrivers: "virtual_device")
        #expect(listed == 0)
        #expect(list.contains("left-index") && list.contains("state hash: "))
        await world.close()
    }
}
