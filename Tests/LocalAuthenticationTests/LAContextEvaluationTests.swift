import Foundation
import KeychainServices
import LocalAuthentication
import SecurityServer
import TestSupport
import Testing

@Suite("LAContext with the virtual reader and pam_matrix", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct LAContextEvaluationTests {
    @Test func matchingFingerSucceedsAndRecordsTheDomainState() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let context = makeContext(in: world)
        #expect(context.evaluatedPolicyDomainState == nil)
        async let outcome = context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        try await world.scan("alice-1")
        #expect(try await outcome)
        let hash = try #require(context.evaluatedPolicyDomainState)
        #expect(hash == context.domainState.biometry.stateHash)
        #expect(context.domainState.biometry.biometryType == .touchID)
        await world.close()
    }

    @Test func nonMatchingFingerFailsTheBiometricPolicy() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let presenter = ScriptedAuthenticationPresenter()
        let context = makeContext(in: world, presenter: presenter)
        async let code = laErrorCode {
            try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        }
        try await world.scan("mallory")
        #expect(await code == .authenticationFailed)
        #expect(presenter.fingerprintStatuses.contains(.notRecognized))
        #expect(context.evaluatedPolicyDomainState == nil)
        await world.close()
    }

    @Test func fallbackAsksForThePasscodeUnderDeviceOwnerAuthentication() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let presenter = ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: ["secret"])
        let context = makeContext(in: world, presenter: presenter)
        context.localizedFallbackTitle = "Use Password"
        #expect(try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "open the vault"))
        #expect(presenter.askedQuestions.count == 1)
        #expect(presenter.askedQuestions.first?.isSecret == true)
        #expect(presenter.shownPrompts.first?.reason == "open the vault")
        #expect(presenter.shownPrompts.first?.fallbackTitle == "Use Password")
        await world.close()
    }

    @Test func fallbackEndsTheBiometricPolicyWithUserFallback() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let presenter = ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: ["secret"])
        let context = makeContext(in: world, presenter: presenter)
        let code = await laErrorCode {
            try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        }
        #expect(code == .userFallback)
        #expect(presenter.askedQuestions.isEmpty)
        await world.close()
    }

    @Test func cancellingThePromptIsUserCancel() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let context = makeContext(in: world, presenter: ScriptedAuthenticationPresenter(fingerprintSteps: [.cancel]))
        let code = await laErrorCode {
            try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
        }
        #expect(code == .userCancel)
        let passcodeCancelled = makeContext(
            in: world, presenter: ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: [nil]))
        #expect(
            await laErrorCode {
                try await passcodeCancelled.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
            } == .userCancel)
        await world.close()
    }

    @Test func invalidateDuringEvaluationIsAppCancelAndAfterIsInvalidContext() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let presenter = ScriptedAuthenticationPresenter()
        let context = makeContext(in: world, presenter: presenter)
        async let code = laErrorCode {
            try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        }
        // Invalidated while the evaluation waits for a finger: once its prompt is shown.
        #expect(await waitUntil { !presenter.shownPrompts.isEmpty })
        context.invalidate()
        #expect(await code == .appCancel)
        #expect(
            await laErrorCode {
                try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
            } == .invalidContext)
        var error: NSError?
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.invalidContext.rawValue)
        context.invalidate()
        await world.close()
    }

    /// `invalidate()` while the terminal presenter reads the passcode: the evaluation ends with `appCancel`, and
    /// the question is withdrawn from the terminal too, which stops reading and echoes again. Before, the
    /// presenter stayed in `read` with echo off after the evaluation had ended.
    @Test func invalidateWithdrawsTheQuestionFromTheTerminal() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let terminal = try PseudoTerminal()
        let context = KeychainClientSelection.$current.withValue(world.client) {
            let context = LAContext()
            context.presenter = TerminalAuthenticationPresenter(device: terminal.path, acceptsInput: true)
            return context
        }
        async let code = laErrorCode {
            try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
        }
        try #require(await onOwnThread { terminal.waitForEchoOff(timeout: 60) }, "the passcode is being read")
        context.invalidate()
        #expect(await code == .appCancel)
        #expect(
            await onOwnThread {
                let deadline = Date().addingTimeInterval(60)
                while !terminal.echoes, Date() < deadline { usleep(10_000) }
                return terminal.echoes
            }, "the terminal echoes again: \(terminal.transcript)")
        await world.close()
    }

    @Test(.embeddedOnly("moves the engine's clock through the reuse window"))
    func aRecentFingerprintIsReusedOnlyInsideTheWindow() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let first = makeContext(in: world)
        async let matched = first.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        try await world.scan("alice-1")
        #expect(try await matched)

        // No presenter: success is only possible by reusing the earlier match.
        world.clock.advance(by: 30)
        let inside = makeContext(in: world, presenter: nil)
        inside.touchIDAuthenticationAllowableReuseDuration = 60
        #expect(try await inside.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "again"))

        let noWindow = makeContext(in: world, presenter: nil)
        #expect(
            await laErrorCode {
                try await noWindow.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "again")
            } == .notInteractive)

        world.clock.advance(by: 40)
        let outside = makeContext(in: world, presenter: nil)
        outside.touchIDAuthenticationAllowableReuseDuration = 60
        #expect(
            await laErrorCode {
                try await outside.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "again")
            } == .notInteractive)

        // Longer windows count as 300 s.
        let capped = makeContext(in: world, presenter: nil)
        capped.touchIDAuthenticationAllowableReuseDuration = 10_000
        #expect(capped.touchIDAuthenticationAllowableReuseDuration == 10_000)
        #expect(try await capped.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "again"))
        world.clock.advance(by: 240)
        let beyond = makeContext(in: world, presenter: nil)
        beyond.touchIDAuthenticationAllowableReuseDuration = 10_000
        #expect(
            await laErrorCode {
                try await beyond.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "again")
            } == .notInteractive)
        await world.close()
    }

    @Test func fiveFailedFingersLockBiometryUntilAPasscodeSuccess() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        try await world.failScans(5)
        let locked = makeContext(in: world)
        #expect(
            await laErrorCode {
                try await locked.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
            } == .biometryLockout)
        var error: NSError?
        #expect(!locked.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        #expect(error?.code == LAError.Code.biometryLockout.rawValue)

        // Locked biometry goes straight to the passcode, whose success lifts the lockout.
        let presenter = ScriptedAuthenticationPresenter(passcodes: ["secret"])
        let recovery = makeContext(in: world, presenter: presenter)
        #expect(try await recovery.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "recover"))
        #expect(presenter.askedQuestions.count == 1)

        let after = makeContext(in: world)
        async let matched = after.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
        try await world.scan("alice-1")
        #expect(try await matched)
        await world.close()
    }

    @Test func interactionNotAllowedOrNoPresenterIsNotInteractive() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let context = makeContext(in: world)
        context.interactionNotAllowed = true
        #expect(
            await laErrorCode {
                try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
            } == .notInteractive)
        let silent = makeContext(in: world, presenter: nil)
        #expect(
            await laErrorCode {
                try await silent.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
            } == .notInteractive)
        await world.close()
    }

    @Test func canEvaluatePolicyReportsWhatIsMissing() async throws {
        let noReader = try LocalAuthenticationWorld(reader: false)
        let context = makeContext(in: noReader)
        var error: NSError?
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        #expect(error?.domain == LAErrorDomain)
        #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
        #expect(context.biometryType == .none)
        error = nil
        #expect(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error == nil)
        await noReader.close()

        let nothingEnrolled = try LocalAuthenticationWorld()
        let empty = makeContext(in: nothingEnrolled)
        #expect(!empty.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        #expect(error?.code == LAError.Code.biometryNotEnrolled.rawValue)
        #expect(empty.biometryType == .touchID)
        #expect(empty.domainState.biometry.stateHash == nil)
        error = nil
        #expect(!empty.canEvaluatePolicy(.deviceOwnerAuthenticationWithCompanion, error: &error))
        #expect(error?.code == LAError.Code.companionNotAvailable.rawValue)
        #expect(!empty.canEvaluatePolicy(.deviceOwnerAuthenticationWithWatch, error: &error))
        #expect(!empty.canEvaluatePolicy(.deviceOwnerAuthenticationWithWristDetection, error: &error))
        #expect(
            await laErrorCode {
                try await empty.evaluatePolicy(.deviceOwnerAuthenticationWithCompanion, localizedReason: "watch")
            } == .companionNotAvailable)
        await nothingEnrolled.close()

        let noPAM = try LocalAuthenticationWorld(pamService: false)
        let noPasscode = makeContext(in: noPAM)
        error = nil
        #expect(!noPasscode.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.passcodeNotSet.rawValue)
        await noPAM.close()
    }

    @Test func theDomainStateHashChangesWithEveryEnrollment() async throws {
        let world = try LocalAuthenticationWorld()
        let context = makeContext(in: world)
        #expect(context.domainState.biometry.stateHash == nil)
        try await world.enroll("alice-1")
        let first = try #require(context.domainState.biometry.stateHash)
        #expect(context.domainState.biometry.stateHash == first)
        try await world.enroll("alice-2", finger: .leftIndex)
        let second = try #require(context.domainState.biometry.stateHash)
        #expect(second != first)
        #expect(context.domainState.stateHash == second)
        await world.close()
    }

    @Test func aPasscodeSuccessUnlocksTheKeychain() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        _ = try world.client.sendBlocking(.lock)
        guard case .locked(true) = try world.client.sendBlocking(.lockState) else {
            Issue.record("the keychain did not lock")
            return
        }
        let context = makeContext(in: world, presenter: ScriptedAuthenticationPresenter(passcodes: ["secret"]))
        #expect(try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock"))
        guard case .locked(false) = try world.client.sendBlocking(.lockState) else {
            Issue.record("the passcode success did not unlock the keychain")
            return
        }
        let wrong = makeContext(in: world, presenter: ScriptedAuthenticationPresenter(passcodes: ["wrong"]))
        #expect(
            await laErrorCode {
                try await wrong.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
            } == .authenticationFailed)
        await world.close()
    }

    @Test func applicationPasswordCredentialsAreSetAndCleared() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let context = makeContext(in: world)
        #expect(!context.isCredentialSet(.applicationPassword))
        #expect(context.setCredential(Data("pw".utf8), type: .applicationPassword))
        #expect(context.isCredentialSet(.applicationPassword))
        #expect(!context.setCredential(Data("1234".utf8), type: .smartCardPIN))
        #expect(context.setCredential(nil, type: .applicationPassword))
        #expect(!context.isCredentialSet(.applicationPassword))
        context.invalidate()
        #expect(!context.setCredential(Data("pw".utf8), type: .applicationPassword))
        await world.close()
    }
}
