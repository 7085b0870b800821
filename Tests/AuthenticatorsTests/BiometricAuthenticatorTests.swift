import Foundation
import SecurityProtocol
import TestSupport
import Testing

@testable import Authenticators

/// The fingerprint authenticator against the real libfprint and its `virtual_device` drivers.
///
/// Serialized: libfprint reads the reader's socket path from the process environment.
@Suite("Fingerprints through libfprint (virtual reader)", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct BiometricAuthenticatorTests {
    @Test func enrolledFingerMatchesAndAnotherFingerDoesNot() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            let enrolled = try await fixture.enroll(authenticator, printID: "alice-right-index")
            #expect(enrolled.finger == .rightIndex && enrolled.driver == "virtual_device")

            let match = try await fixture.verify(authenticator, feeding: ["SCAN alice-right-index"])
            #expect(match.value?.identifier == enrolled.identifier)

            let noMatch = try await fixture.verify(authenticator, feeding: ["SCAN mallory"])
            #expect(noMatch.failure?.code == .authenticationFailed)
            #expect(try authenticator.policy.currentState().biometricFailures == 1)
        }
    }

    @Test func enrollmentReportsEveryStageAndRetryReason() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        let log = EventLog<EnrollmentEvent>()
        try await fixture.withAuthenticator { authenticator in
            _ = try await fixture.enroll(
                authenticator, printID: "p1",
                scans: ["SCAN p1", "RETRY 2", "SCAN p1", "SCAN other", "SCAN p1", "SCAN p1", "SCAN p1"],
                progress: log.append)
        }
        let stages = log.events.compactMap { event -> Int? in
            if case .stageCompleted(let completed, 5) = event { return completed }
            return nil
        }
        let retries = log.events.compactMap { event -> ScanRetryReason? in
            if case .retry(let reason, _, 5, _) = event { return reason }
            return nil
        }
        #expect(stages == [1, 2, 3, 4, 5])
        // RETRY 2 = centre your finger; a different finger mid-enrollment is the reader's general retry.
        #expect(retries == [.centerFinger, .general])
        guard case .retry(_, 1, _, _)? = log.events.dropFirst().first else {
            Issue.record("the retry should be reported at stage 1, got \(log.events)")
            return
        }
    }

    @Test func retryDuringVerifyIsReportedAndTheNextScanMatchesWithoutCountingAFailure() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        let log = EventLog<VerificationEvent>()
        try await fixture.withAuthenticator { authenticator in
            let enrolled = try await fixture.enroll(authenticator, printID: "p1")

            let result = try await fixture.verify(authenticator, feeding: ["RETRY 1", "SCAN p1"], progress: log.append)

            #expect(result.value?.identifier == enrolled.identifier)
            #expect(try authenticator.policy.currentState().biometricFailures == 0)
        }
        #expect(log.events.contains { if case .retry(.tooShort, _) = $0 { true } else { false } })
        #expect(log.events.filter { $0 == .waitingForFinger }.count == 2)
    }

    @Test func injectedReaderErrorIsBiometryNotAvailableAndNotAFailedAttempt() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            _ = try await fixture.enroll(authenticator, printID: "p1")

            let result = try await fixture.verify(authenticator, feeding: ["ERROR 5"])

            #expect(result.failure?.code == .biometryNotAvailable)
            #expect(result.failure?.backendStatus == .init(library: "libfprint", code: 5))
            #expect(try authenticator.policy.currentState().biometricFailures == 0)
            // The reader stays usable.
            #expect(try await fixture.verify(authenticator, feeding: ["SCAN p1"]).value != nil)
        }
    }

    @Test func enrollmentFailingOrCancelledMidwayStoresNothing() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            let failed = await VirtualReaderFixture.capture {
                try await fixture.enroll(authenticator, printID: "p1", scans: ["SCAN p1", "SCAN p1", "ERROR 5"])
            }
            #expect(failed.failure?.code == .biometryNotAvailable)

            let log = EventLog<EnrollmentEvent>()
            let task = Task {
                await VirtualReaderFixture.capture {
                    try await authenticator.enroll(finger: .leftIndex, progress: log.append)
                }
            }
            try await fixture.socket.send("SCAN p2", "SCAN p2")
            #expect(await waitUntil(within: .seconds(60)) { log.events.count == 2 }, "both scans were taken")
            task.cancel()
            let (cancelled, elapsed) = await measure { await task.value }
            // An enrollment waits for its next scan without end: the code says the cancel ended it, the bound only
            // that it did not wait for another scan.
            #expect(cancelled.failure?.code == .appCancel)
            #expect(elapsed < .seconds(30), "cancellation took \(elapsed)")
            #expect(log.events == [.stageCompleted(completed: 1, total: 5), .stageCompleted(completed: 2, total: 5)])

            #expect(try authenticator.enrolledPrints().isEmpty)
            #expect(try authenticator.stateHash() == nil)
        }
    }

    @Test func busyReaderIsBiometryNotAvailableAndTheNextAttemptWorks() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            let enrolled = try await fixture.enroll(authenticator, printID: "p1")

            let busy = try await fixture.verify(authenticator, feeding: ["ERROR 4"])
            #expect(busy.failure?.code == .biometryNotAvailable)
            #expect(busy.failure?.backendStatus == .init(library: "libfprint", code: 4))
            #expect(busy.failure?.message.contains("busy") == true)

            let again = try await fixture.verify(authenticator, feeding: ["SCAN p1"])
            #expect(again.value?.identifier == enrolled.identifier)
        }
    }

    @Test func unplugDuringVerifyIsBiometryDisconnectedAndTheNextAttemptFindsTheReaderAgain() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            let enrolled = try await fixture.enroll(authenticator, printID: "p1")

            let unplugged = try await fixture.verify(authenticator, feeding: ["SLEEP 50", "UNPLUG"])
            #expect(unplugged.failure?.code == .biometryDisconnected)
            #expect(unplugged.failure?.backendStatus == .init(library: "libfprint", code: 256))

            // The retry path: the next operation discovers and opens the reader afresh.
            let again = try await fixture.verify(authenticator, feeding: ["SCAN p1"])
            #expect(again.value?.identifier == enrolled.identifier)
        }
    }

    @Test func cancellingTheTaskMidVerifyReturnsWithin100Milliseconds() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        let log = EventLog<VerificationEvent>()
        try await fixture.withAuthenticator { authenticator in
            _ = try await fixture.enroll(authenticator, printID: "p1")
            let task = Task {
                await VirtualReaderFixture.capture { try await authenticator.verify(progress: log.append) }
            }
            #expect(await waitUntil { log.events == [.waitingForFinger] }, "the scan should be waiting for a finger")

            let start = ContinuousClock.now
            task.cancel()
            let result = await task.value
            let elapsed = ContinuousClock.now - start

            #expect(result.failure?.code == .appCancel)
            // .appCancel, not the attempt's timeout (.systemCancel), says the cancel ended it; the bound is a hang guard.
            #expect(elapsed < .seconds(30), "cancellation took \(elapsed)")
            #expect(try authenticator.policy.currentState().biometricFailures == 0)
        }
    }

    @Test func attemptWithoutAFingerTimesOutAsSystemCancel() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator(attemptTimeout: .milliseconds(300)) { authenticator in
            _ = try await fixture.enroll(authenticator, printID: "p1")

            let (result, elapsed) = await measure {
                await VirtualReaderFixture.capture { try await authenticator.verify() }
            }

            #expect(result.failure?.code == .systemCancel)
            #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(30), "timed out after \(elapsed)")
        }
    }

    @Test func stateHashChangesOnEnrollAndRemoveAndIsStableOtherwiseAcrossInstances() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            #expect(try authenticator.stateHash() == nil)

            let first = try await fixture.enroll(authenticator, printID: "p1", finger: .rightIndex)
            let afterFirst = try #require(try authenticator.stateHash())
            #expect(afterFirst.count == 32)
            #expect(try authenticator.stateHash() == afterFirst)
            _ = try await fixture.verify(authenticator, feeding: ["SCAN p1"])
            #expect(try authenticator.stateHash() == afterFirst, "a verification must not change the hash")
            // A new instance over the same state directory, as after a process restart.
            #expect(try fixture.authenticator().stateHash() == afterFirst)

            let second = try await fixture.enroll(authenticator, printID: "p2", finger: .leftIndex)
            let afterSecond = try #require(try authenticator.stateHash())
            #expect(afterSecond != afterFirst)
            #expect(try fixture.authenticator().stateHash() == afterSecond)
            #expect(Set(try authenticator.enrolledPrints().map(\.identifier)) == [first.identifier, second.identifier])

            try await authenticator.remove(second.identifier)
            let afterRemove = try #require(try authenticator.stateHash())
            #expect(afterRemove != afterSecond)
            try await authenticator.remove(first.identifier)
            #expect(try authenticator.stateHash() == nil)
            #expect(try authenticator.enrolledPrints().isEmpty)
        }
    }

    @Test func reEnrollingAFingerReplacesItsPrintAndChangesTheHash() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            let old = try await fixture.enroll(authenticator, printID: "p1")
            let oldHash = try authenticator.stateHash()
            let new = try await fixture.enroll(authenticator, printID: "p1-again")

            #expect(try authenticator.enrolledPrints().map(\.identifier) == [new.identifier])
            #expect(new.identifier != old.identifier)
            #expect(try authenticator.stateHash() != oldHash)
            #expect(
                try await fixture.verify(authenticator, feeding: ["SCAN p1"]).failure?.code == .authenticationFailed)
        }
    }

    @Test func fiveFailedScansLockBiometryUntilAPasscodeSuccess() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        let pam = try MatrixPAM()
        defer { pam.remove() }
        try await fixture.withAuthenticator { authenticator in
            _ = try await fixture.enroll(authenticator, printID: "p1")
            for attempt in 1...5 {
                let result = try await fixture.verify(authenticator, feeding: ["SCAN wrong-\(attempt)"])
                #expect(result.failure?.code == .authenticationFailed)
            }

            // Locked: refused before the reader is asked (nothing is fed, so a scan would hang until timeout).
            let locked = await VirtualReaderFixture.capture { try await authenticator.verify() }
            #expect(locked.failure?.code == .biometryLockout)
            let restarted = try fixture.authenticator()
            #expect(
                await VirtualReaderFixture.capture { try await restarted.verify() }.failure?.code == .biometryLockout)

            let passcode = PasscodeAuthenticator(
                configuration: pam.configuration, policy: try AttemptPolicy(directory: fixture.stateDirectory))
            try await passcode.authenticate(user: "alice", presenter: ScriptedPresenter(passcode: "secret"))

            #expect(try await fixture.verify(authenticator, feeding: ["SCAN p1"]).value != nil)
        }
    }

    @Test func noEnrolledPrintIsBiometryNotEnrolled() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            let result = await VirtualReaderFixture.capture { try await authenticator.verify() }
            #expect(result.failure?.code == .biometryNotEnrolled)
        }
    }

    @Test func missingReaderIsBiometryNotAvailable() async throws {
        let fixture = try VirtualReaderFixture()
        defer { fixture.directory.remove() }
        let authenticator = try BiometricAuthenticator(
            configuration: .init(stateDirectory: fixture.stateDirectory, username: "alice", drivers: ["no_such_driver"])
        )

        let result = await VirtualReaderFixture.capture { try await authenticator.open() }

        #expect(result.failure?.code == .biometryNotAvailable)
    }

    @Test func storageReaderIdentifiesAmongSeveralPrintsAndRemoveDeletesFromTheReader() async throws {
        let fixture = try VirtualReaderFixture(storage: true)
        defer { fixture.directory.remove() }
        try await fixture.withAuthenticator { authenticator in
            #expect(try await authenticator.open().canIdentify)
            _ = try await fixture.enroll(authenticator, printID: "thumb", finger: .rightThumb)
            let index = try await fixture.enroll(authenticator, printID: "index", finger: .rightIndex)

            // LIST is answered only while an operation pumps libfprint's main context, so it rides along.
            let identifyReplies = try await feedDuringVerify(fixture, authenticator, ["LIST", "SCAN index"])
            #expect(identifyReplies.result.value?.identifier == index.identifier)
            #expect(identifyReplies.replies.first?.split(separator: "\n").sorted() == ["index", "thumb"])

            async let removal: Void = authenticator.remove(index.identifier)
            try await fixture.socket.send("CONT ")
            try await removal

            let afterRemoval = try await feedDuringVerify(fixture, authenticator, ["LIST", "SCAN index"])
            #expect(afterRemoval.replies.first == "thumb\n")
            #expect(afterRemoval.result.failure?.code == .authenticationFailed)
        }
    }

    private func feedDuringVerify(
        _ fixture: VirtualReaderFixture, _ authenticator: BiometricAuthenticator, _ commands: [String]
    ) async throws -> (result: Result<EnrolledPrintInfo, AuthenticationError>, replies: [String]) {
        async let result = VirtualReaderFixture.capture { try await authenticator.verify() }
        let replies = try await fixture.socket.send(commands)
        return (await result, replies)
    }
}
