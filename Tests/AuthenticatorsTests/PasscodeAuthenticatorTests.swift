import Foundation
import SecurityProtocol
import Testing

@testable import Authenticators

/// The passcode authenticator against the real Linux-PAM library, with pam_matrix through `pam_start_confdir`.
@Suite("Passcode authentication through PAM (pam_matrix)")
struct PasscodeAuthenticatorTests {
    @Test func rightPasscodeSucceedsAndForwardsModuleMessages() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let presenter = ScriptedPresenter(passcode: "secret")
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: nil)

        try await authenticator.authenticate(user: "alice", presenter: presenter)

        #expect(presenter.askedPrompts == [PasscodePrompt(text: "Password: ", echo: false)])
        // pam_matrix's `verbose` message arrives with a NULL response pointer: reaching here means no crash.
        #expect(presenter.shownMessages == [PasscodeMessage(isError: false, text: "Authentication succeeded")])
    }

    @Test func wrongPasscodeFailsAndIsCounted() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let policy = try AttemptPolicy(directory: pam.directory.path + "/state")
        let presenter = ScriptedPresenter(passcode: "not-the-secret")
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: policy)

        let error = await authenticationError {
            try await authenticator.authenticate(user: "alice", presenter: presenter)
        }

        #expect(error?.code == .authenticationFailed)
        #expect(error?.backendStatus == .init(library: "pam", code: 7))
        #expect(error?.retryAfter == nil)
        #expect(try policy.currentState().passcodeFailures == 1)
        #expect(presenter.shownMessages.contains(PasscodeMessage(isError: true, text: "Authentication failed")))
        #expect(error.map { !String(describing: $0).contains("not-the-secret") } == true)
    }

    @Test func unknownUserFailsLikeAWrongPasscode() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: nil)

        let error = await authenticationError {
            try await authenticator.authenticate(user: "carol", presenter: ScriptedPresenter(passcode: "secret"))
        }

        #expect(error?.code == .authenticationFailed)
    }

    @Test func presenterCancellingIsUserCancelAndNotCounted() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let policy = try AttemptPolicy(directory: pam.directory.path + "/state")
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: policy)

        let error = await authenticationError {
            try await authenticator.authenticate(user: "alice", presenter: ScriptedPresenter(answers: [nil]))
        }

        #expect(error?.code == .userCancel)
        #expect(try policy.currentState().passcodeFailures == 0)
    }

    @Test func accountRefusedByPAMFailsWithReasonAndIsNotCounted() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let policy = try AttemptPolicy(directory: pam.directory.path + "/state")
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: policy)

        // bob's passcode is right, but pam_matrix's account phase only allows him the service "other".
        let error = await authenticationError {
            try await authenticator.authenticate(user: "bob", presenter: ScriptedPresenter(passcode: "hunter2"))
        }

        #expect(error?.code == .authenticationFailed)
        #expect(error?.backendStatus == .init(library: "pam", code: 6))
        #expect(try policy.currentState().passcodeFailures == 0)
    }

    @Test func missingServiceIsPasscodeNotSet() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let configuration = PasscodeAuthenticator.Configuration(
            service: "no-such-service", configurationDirectory: pam.directory.path)
        let authenticator = PasscodeAuthenticator(configuration: configuration, policy: nil)

        let error = await authenticationError {
            try await authenticator.authenticate(user: "alice", presenter: ScriptedPresenter(passcode: "secret"))
        }

        #expect(error?.code == .passcodeNotSet)
        #expect(try await authenticator.isPasscodeSet(user: "alice") == false)
    }

    @Test func passcodeIsSetWhenServiceExistsAndAccountIsAccepted() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: nil)

        #expect(try await authenticator.isPasscodeSet(user: "alice"))
        #expect(try await authenticator.isPasscodeSet(user: "bob") == false)
    }

    @Test func passcodeWithNULByteIsRefusedNotTruncated() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: nil)

        // "secret\0x" would authenticate as "secret" if it were cut at the NUL.
        let error = await authenticationError {
            try await authenticator.authenticate(user: "alice", presenter: ScriptedPresenter(passcode: "secret\u{0}x"))
        }

        #expect(error?.code == .authenticationFailed)
    }
}

/// The escalating passcode waits of the attempt policy, enforced before PAM is asked and persisted on disk.
@Suite("Passcode escalation")
struct PasscodeEscalationTests {
    @Test func delayTableEscalatesAsSpecified() {
        let delays = (1...12).map { AttemptPolicy.passcodeDelay(afterFailures: $0) }
        #expect(delays[0..<4].allSatisfy { $0 == .zero })
        #expect(delays[4] == .seconds(60))
        #expect(delays[5] == .seconds(300))
        #expect(delays[6] == .seconds(900) && delays[7] == .seconds(900))
        #expect(delays[8...].allSatisfy { $0 == .seconds(3600) })
    }

    @Test func fifthFailureRefusesTheNextAttemptBeforePAMForOneMinuteAcrossInstances() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let stateDirectory = pam.directory.path + "/state"
        let clock = TestClock()
        let authenticator = PasscodeAuthenticator(
            configuration: pam.configuration, policy: try AttemptPolicy(directory: stateDirectory, clock: clock))

        for _ in 1...5 {
            let error = await authenticationError {
                try await authenticator.authenticate(user: "alice", presenter: ScriptedPresenter(passcode: "wrong"))
            }
            #expect(error?.code == .authenticationFailed && error?.retryAfter == nil)
            clock.advance(by: 1)
        }

        // A new authenticator and a new policy object over the same directory: as after a process restart.
        let restarted = PasscodeAuthenticator(
            configuration: pam.configuration, policy: try AttemptPolicy(directory: stateDirectory, clock: clock))
        let presenter = ScriptedPresenter(passcode: "secret")
        let refused = await authenticationError {
            try await restarted.authenticate(user: "alice", presenter: presenter)
        }
        #expect(refused?.code == .authenticationFailed)
        #expect(refused?.retryAfter == .seconds(59))
        #expect(presenter.askedPrompts.isEmpty, "PAM must not be asked while the wait runs")

        clock.advance(by: 60)
        try await restarted.authenticate(user: "alice", presenter: presenter)
        #expect(presenter.askedPrompts.count == 1)
        #expect(try AttemptPolicy(directory: stateDirectory, clock: clock).currentState().passcodeFailures == 0)
    }

    @Test func sixthFailureWaitsFiveMinutes() async throws {
        let pam = try MatrixPAM()
        defer { pam.remove() }
        let clock = TestClock()
        let policy = try AttemptPolicy(directory: pam.directory.path + "/state", clock: clock)
        let authenticator = PasscodeAuthenticator(configuration: pam.configuration, policy: policy)
        for _ in 1...5 { try policy.recordPasscodeFailure() }
        clock.advance(by: 61)

        _ = await authenticationError {
            try await authenticator.authenticate(user: "alice", presenter: ScriptedPresenter(passcode: "wrong"))
        }
        let refused = await authenticationError {
            try await authenticator.authenticate(user: "alice", presenter: ScriptedPresenter(passcode: "secret"))
        }

        #expect(try policy.currentState().passcodeFailures == 6)
        #expect(refused?.retryAfter == .seconds(300))
    }
}
