import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

/// Fingerprint unlock of the keychain after a passcode unlock (issue "The login keychain", item 2): once the
/// passcode has unlocked the keychain, a lock keeps the `ak` keys in localauthd for an enrolled finger, for at most
/// 48 hours, never after 5 failed scans, never across a restart, never embedded.
///
/// Daemon mode runs a real localauthd; the embedded pass runs the very engine localauthd runs, inside the test
/// process with its unlocked keys in its own memory (`unlockedKeysInProcess`), so the clock can be moved 48 hours.
@Suite(
    "Keychain: fingerprint unlock after a passcode unlock", .serialized, .virtualReaderLock(timeLimit: .seconds(120)))
struct KeychainFingerprintUnlockTests {
    static let marker = "ak-fingerprint-marker-7d21"

    /// Answers the passcode with `secret`; leaves fingerprint prompts to the reader.
    struct ReaderPresenter: EvaluationPresenter {
        func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void)
        {}
        func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
        func fingerprintPromptDidEnd() {}
        func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
            SecureBytes(Array("secret".utf8))
        }
        func show(_ message: PasscodeMessage) {}
    }

    static let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "Unlock the keychain"))

    /// A world with an enrolled finger (`alice-right`), an `ak` item, the keychain unlocked by passcode (which
    /// seals it under the passcode) and then locked.
    func lockedAfterPasscodeUnlock(unlockedKeysInProcess: Bool = true) async throws -> LocalAuthenticationWorld {
        let world = try LocalAuthenticationWorld(unlockedKeysInProcess: unlockedKeysInProcess)
        try await world.enroll("alice-right")
        try await world.run {
            let added = SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                    kSecAttrAccount as String: "ak", kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked,
                    kSecValueData as String: Data(Self.marker.utf8),
                ] as CFDictionary, nil)
            #expect(added == errSecSuccess)
        }
        try await unlockWithPasscode(world)
        _ = try await world.client.send(.lock)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        return world
    }

    func unlockWithPasscode(_ world: LocalAuthenticationWorld) async throws {
        _ = try await world.client.send(.unlockWithPasscode(Self.options), presenter: ReaderPresenter())
    }

    /// Reads the `ak` item without any prompt: its status (and the marker when it opened).
    func readAK(_ world: LocalAuthenticationWorld) async throws -> OSStatus {
        try await world.run {
            var result: CFTypeRef?
            let status = SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                    kSecAttrAccount as String: "ak", kSecReturnData as String: true,
                ] as CFDictionary, &result)
            if status == errSecSuccess { #expect((result as? Data) == Data(Self.marker.utf8)) }
            return status
        }
    }

    /// Asks for a fingerprint unlock and, when `finger` is given, scans it; the `LAError` code, nil on success.
    func unlockWithFinger(_ world: LocalAuthenticationWorld, scanning finger: String?) async throws
        -> AuthenticationError.Code?
    {
        async let outcome: AuthenticationError.Code? = {
            do {
                _ = try await world.client.send(.unlockWithBiometry(Self.options), presenter: ReaderPresenter())
                return nil
            } catch let error as AuthenticationError {
                return error.code
            }
        }()
        if let finger { try await world.scan(finger) }
        return try await outcome
    }

    @Test func theEnrolledFingerUnlocksAfterThePasscodeDidAndAnotherFingerDoesNot() async throws {
        let world = try await lockedAfterPasscodeUnlock()
        #expect(try await unlockWithFinger(world, scanning: "mallory") == .authenticationFailed)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        #expect(try await unlockWithFinger(world, scanning: "alice-right") == nil)
        #expect(try await readAK(world) == errSecSuccess)
        // Locked again: the finger works again (the keys are kept anew at each lock).
        _ = try await world.client.send(.lock)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        #expect(try await unlockWithFinger(world, scanning: "alice-right") == nil)
        #expect(try await readAK(world) == errSecSuccess)
        await world.close()
    }

    @Test(.embeddedOnly("moves the engine's clock 48 hours"))
    func fortyEightHoursAfterThePasscodeUnlockOnlyThePasscodeUnlocks() async throws {
        let world = try await lockedAfterPasscodeUnlock()
        world.clock.advance(by: 47 * 3600)
        #expect(try await unlockWithFinger(world, scanning: "alice-right") == nil)
        _ = try await world.client.send(.lock)
        world.clock.advance(by: 3600 + 1)
        // No scan is even asked for.
        #expect(try await unlockWithFinger(world, scanning: nil) == .biometryNotAvailable)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        // The passcode opens a new window.
        try await unlockWithPasscode(world)
        #expect(try await readAK(world) == errSecSuccess)
        _ = try await world.client.send(.lock)
        #expect(try await unlockWithFinger(world, scanning: "alice-right") == nil)
        #expect(try await readAK(world) == errSecSuccess)
        await world.close()
    }

    /// Issue "Caller identity", attack 8: the window runs on `CLOCK_BOOTTIME`. A wall clock stepped back 46 hours
    /// after 49 hours have passed (as root, timedated or a forged time source could) does not keep it open, and a
    /// wall clock stepped forward does not close it early.
    @Test(.embeddedOnly("moves the engine's clocks"))
    func steppingTheWallClockNeitherStretchesNorShortensTheWindow() async throws {
        let world = try await lockedAfterPasscodeUnlock()
        world.clock.setWallClock(by: 72 * 3600)
        #expect(try await unlockWithFinger(world, scanning: "alice-right") == nil, "stepped forward: still open")
        _ = try await world.client.send(.lock)
        world.clock.advance(by: 49 * 3600)
        world.clock.setWallClock(by: -(72 + 46) * 3600)
        #expect(try await unlockWithFinger(world, scanning: nil) == .biometryNotAvailable)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        await world.close()
    }

    @Test func afterFiveFailedScansOnlyThePasscodeUnlocks() async throws {
        let world = try await lockedAfterPasscodeUnlock()
        for _ in 0..<5 {
            #expect(try await unlockWithFinger(world, scanning: "mallory") == .authenticationFailed)
        }
        #expect(try await unlockWithFinger(world, scanning: nil) == .biometryNotAvailable)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        try await unlockWithPasscode(world)
        #expect(try await readAK(world) == errSecSuccess)
        await world.close()
    }

    @Test(.enabled(if: TestMode.current == .daemon, "restarts localauthd"))
    func afterADaemonRestartOnlyThePasscodeUnlocks() async throws {
        let world = try await lockedAfterPasscodeUnlock()
        let restarted = try world.engine.restartedClient(accessGroups: ["test.group"])
        do {
            _ = try await restarted.send(.unlockWithBiometry(Self.options), presenter: ReaderPresenter())
            Issue.record("a fingerprint unlocked the keychain after a restart")
        } catch let error as AuthenticationError {
            #expect(error.code == .biometryNotAvailable)
        }
        guard case .locked(true) = try await restarted.send(.lockState) else {
            Issue.record("the keychain is not locked after a restart")
            return
        }
        await world.close()
    }

    @Test(.embeddedOnly("the embedded client's own engine, keys in the kernel keyring"))
    func embeddedClientsNeverUnlockByFinger() async throws {
        let world = try await lockedAfterPasscodeUnlock(unlockedKeysInProcess: false)
        #expect(try await unlockWithFinger(world, scanning: nil) == .biometryNotAvailable)
        #expect(try await readAK(world) == errSecInteractionNotAllowed)
        await world.close()
    }
}
