import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing

/// The attack review's findings about attempts, reuse and enrollment (issue "Fixes from an attack review"), each
/// tried as the attacker did: concurrent evaluations, an edited or deleted state file, a reused match, an
/// enrollment without the passcode, a restored copy of the print files.
@Suite("Attack review: attempts, reuse, enrollment", .serialized, .virtualReaderLock(timeLimit: .seconds(120)))
struct AttackReviewTests {
    /// Finding 1: twelve concurrent contexts once brought eleven non-matching scans to the matcher and the twelfth
    /// matched. Now the attempt is reserved on the reader's thread: exactly five scans reach the matcher, the
    /// rest are refused as locked out before the reader is touched, and the right finger queued last never helps.
    @Test(.libfprintOnly("counts the scans this process's libfprint takes from the virtual device, one queue of them"))
    func concurrentFingerprintEvaluationsReachTheMatcherOnlyUpToTheLimit() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let presenter = ScriptedAuthenticationPresenter()
        let contexts = (0..<20).map { _ in makeContext(in: world, presenter: presenter) }
        let evaluations = Task {
            await withTaskGroup(of: LAError.Code?.self) { group in
                for context in contexts {
                    group.addTask {
                        await laErrorCode {
                            try await context.evaluatePolicy(
                                .deviceOwnerAuthenticationWithBiometrics, localizedReason: "race")
                        }
                    }
                }
                var codes: [LAError.Code?] = []
                for await code in group { codes.append(code) }
                return codes
            }
        }
        // Scans are taken only while an evaluation is at the reader: stop feeding once nobody takes them. A loaded
        // machine can take seconds between one evaluation's end and the next one's scan (a fresh-clone run failed
        // with 2 s), so a scan nobody takes in 10 s ends the feeding.
        var fed = 0
        for index in 0..<20 {
            do {
                try await world.socket.send(index < 19 ? "SCAN mallory" : "SCAN alice-1", timeout: .seconds(10))
                fed += 1
            } catch {
                break
            }
        }
        let codes = await evaluations.value
        let waits = presenter.fingerprintStatuses.filter { $0 == .waitingForFinger }.count
        #expect(codes.count == 20)
        #expect(codes.filter { $0 == .authenticationFailed }.count == 5)
        #expect(codes.filter { $0 == .biometryLockout }.count == 15)
        #expect(!codes.contains(nil), "no evaluation may succeed past the lockout")
        #expect(waits == 5, "scans that reached the matcher")
        #expect(fed <= 6)
        if let contexts = world.embeddedContexts { #expect(try contexts.attemptPolicy.currentState().biometryLocked) }
        await world.close()
    }

    /// Finding 1: after a passcode wait ran out, thirty concurrent guesses all reached PAM and the right one wiped
    /// the count. Now one guess reaches PAM (and counts), the other 29 wait out the next delay without PAM.
    @Test(.embeddedOnly("moves the engine's clock past the passcode wait"))
    func concurrentPasscodeGuessesAfterAWaitReachPAMOnce() async throws {
        let world = try LocalAuthenticationWorld()
        for _ in 0..<5 {
            let context = makeContext(in: world, presenter: ScriptedAuthenticationPresenter(passcodes: ["wrong"]))
            #expect(
                await laErrorCode {
                    try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "guess")
                } == .authenticationFailed)
        }
        world.clock.advance(by: 61)
        let guesses: [String?] = Array(repeating: "wrong", count: 29) + ["secret"]
        let presenter = ScriptedAuthenticationPresenter(passcodes: guesses)
        let contexts = (0..<30).map { _ in makeContext(in: world, presenter: presenter) }
        let codes = await withTaskGroup(of: LAError.Code?.self) { group in
            for context in contexts {
                group.addTask {
                    await laErrorCode {
                        try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "race")
                    }
                }
            }
            var codes: [LAError.Code?] = []
            for await code in group { codes.append(code) }
            return codes
        }
        #expect(presenter.askedQuestions.count == 1, "guesses that reached PAM")
        #expect(codes.count == 30)
        #expect(codes.allSatisfy { $0 == .authenticationFailed })
        let state = try world.contexts.attemptPolicy.currentState()
        #expect(state.passcodeFailures == 6)
        await world.close()
    }

    /// Finding 1: deleting the attempt file (then `attempts.json`) lifted a lockout. Now a missing or edited file reads as locked out.
    @Test(.embeddedOnly("opens a second embedded engine on the tampered store"))
    func deletingOrEditingTheAttemptFileLocksOutInsteadOfResetting() async throws {
        for tamper in ["delete", "edit"] {
            let world = try LocalAuthenticationWorld()
            try await world.enroll("alice-1")
            try await world.failScans(5)
            let file = world.storeDirectory + "/" + AttemptPolicy.fileName
            if tamper == "delete" {
                try FileManager.default.removeItem(atPath: file)
            } else {
                let fresh = #"{"biometricFailures":0,"biometryLocked":false,"passcodeFailures":0}"#
                try Data(fresh.utf8).write(to: URL(fileURLWithPath: file))
            }
            // A fresh engine on the same store, as a restarted program would open it.
            let restarted = try EmbeddedClient(
                configuration: EmbeddedConfiguration(
                    dataDirectory: URL(fileURLWithPath: world.directory.path + "/store"), accessGroups: ["test.group"]),
                authentication: world.contexts.configuration)
            let context = KeychainClientSelection.$current.withValue(restarted) { LAContext() }
            context.presenter = ScriptedAuthenticationPresenter()
            #expect(
                await laErrorCode {
                    try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
                } == .biometryLockout, "after \(tamper)")
            let state = try restarted.engine.authentication!.attemptPolicy.currentState()
            #expect(state.biometryLocked && state.passcodeFailures >= 9, "after \(tamper)")
            await restarted.engine.authentication!.closeReader()
            await world.close()
        }
    }

    /// Finding 1: an older copy of the attempt file put back while the program runs is a rollback, not a reset.
    @Test func restoringAnOlderAttemptFileIsSeenAsARollback() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let file = world.storeDirectory + "/" + AttemptPolicy.fileName
        let saved = try Data(contentsOf: URL(fileURLWithPath: file))
        try await world.failScans(5)
        try saved.write(to: URL(fileURLWithPath: file))
        let context = makeContext(in: world)
        #expect(
            await laErrorCode {
                try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
            } == .biometryLockout)
        await world.close()
    }

    /// Finding 8: the reuse window satisfied keychain item access controls, and survived `invalidate()` of the
    /// context that matched. Apple's reuse applies to device unlock, not keychain retrievals.
    @Test func theReuseWindowNeverOpensAnItemAndInvalidateForgetsTheMatch() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let first = makeContext(in: world)
        async let matched = first.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        try await world.scan("alice-1")
        #expect(try await matched)
        try await world.run {
            #expect(addProtected("bio", flags: .biometryAny) == errSecSuccess)
            let reusing = LAContext()
            reusing.presenter = nil
            reusing.touchIDAuthenticationAllowableReuseDuration = 60
            let reused = try await reusing.evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics, localizedReason: "reuse")
            #expect(reused)
            #expect(readProtected("bio", context: reusing).status == errSecInteractionNotAllowed)
            #expect(readProtected("bio", context: first).status == errSecSuccess)
        }
        first.invalidate()
        let after = makeContext(in: world, presenter: nil)
        after.touchIDAuthenticationAllowableReuseDuration = 60
        #expect(
            await laErrorCode {
                try await after.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "reuse")
            } == .notInteractive, "the invalidated context's match is no longer offered for reuse")
        await world.close()
    }

    /// Finding 5: enrolling a finger needed no authentication, and the new finger then read a `biometryAny` item.
    @Test(.embeddedOnly("calls the engine's contexts and moves its clock past the enrollment window"))
    func enrollingOrRemovingAFingerNeedsTheContextsPasscode() async throws {
        let world = try LocalAuthenticationWorld()
        let contexts = world.contexts
        let bare = try contexts.createContext()
        await #expect(throws: AuthenticationError.self) {
            _ = try await contexts.enroll(finger: .leftIndex, context: bare)
        }
        #expect(try contexts.biometric.enrolledPrints().isEmpty)

        // A fingerprint is not enough: the passcode is.
        let owner = makeContext(in: world, presenter: ScriptedAuthenticationPresenter(passcodes: ["secret"]))
        #expect(try await owner.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "enroll"))
        let proven = try owner.authenticationContextID()
        let stages = try await contexts.biometric.open().enrollStages
        async let enrolled = contexts.enroll(finger: .leftIndex, context: proven)
        try await world.socket.send(Array(repeating: "SCAN mallory", count: stages))
        let print = try await enrolled
        #expect(try contexts.biometric.enrolledPrints().map(\.identifier) == [print.identifier])

        await #expect(throws: AuthenticationError.self) {
            try await contexts.removePrint(print.identifier, context: bare)
        }
        world.clock.advance(by: AuthenticationContexts.enrollmentPasscodeWindow + 1)
        await #expect(throws: AuthenticationError.self) {
            try await contexts.removePrint(print.identifier, context: proven)
        }
        #expect(try contexts.biometric.enrolledPrints().count == 1)
        await world.close()
    }

    /// Finding 9: restoring a saved `fingerprints/` directory revived `.biometryCurrentSet` items; a crash between
    /// deleting a print and renewing the salt left the original hash for good.
    @Test(
        .embeddedOnly("compares the engine's own state hash"),
        .libfprintOnly("restores this process's own print files; fprintd keeps its prints in its own store"))
    func restoringSavedPrintFilesDoesNotReviveARetiredSet() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let prints = world.directory.path + "/store/fingerprints"
        let saved = world.directory.path + "/saved-fingerprints"
        let original = try world.contexts.currentStateHash()  // (makes the salt, so the copy holds it)
        try FileManager.default.copyItem(atPath: prints, toPath: saved)
        try await world.run {
            #expect(addProtected("current", flags: .biometryCurrentSet) == errSecSuccess)
        }
        try await world.enroll("mallory", finger: .leftIndex)
        #expect(try world.contexts.currentStateHash() != original)

        // The attacker puts the old print files back.
        try FileManager.default.removeItem(atPath: prints)
        try FileManager.default.copyItem(atPath: saved, toPath: prints)
        #expect(try world.contexts.currentStateHash() != original)
        try await world.run {
            let context = LAContext()
            context.presenter = ScriptedAuthenticationPresenter()
            async let matched = context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "r")
            try await world.scan("alice-1")
            #expect(try await matched)
            #expect(readProtected("current", context: context).status == errSecAuthFailed)
        }

        // The generation is raised before any print changes: a change cut short still gives a new hash.
        let before = try world.contexts.currentStateHash()
        try world.contexts.attemptPolicy.advanceEnrollmentGeneration()
        #expect(try world.contexts.currentStateHash() != before)
        await world.close()
    }
}
