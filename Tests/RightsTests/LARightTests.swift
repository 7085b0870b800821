import Foundation
import LocalAuthentication
import Synchronization
import TestSupport
import Testing

@Suite("LARight: transitions, notifications, state updates", .serialized, .virtualReaderLock)
struct LARightTests {
    @Test func requirementsAndStatesKeepApplesShapes() {
        #expect(LARight.State.unknown.rawValue == 0)
        #expect(LARight.State.authorizing.rawValue == 1)
        #expect(LARight.State.authorized.rawValue == 2)
        #expect(LARight.State.notAuthorized.rawValue == 3)
        let requirements: [LAAuthenticationRequirement] = [
            .default, .biometry, .biometryCurrentSet, .biometry(fallback: .devicePasscode),
            .biometry(fallback: .default),
        ]
        #expect(requirements.count == 5)
        let right = LARight()
        #expect(right.state == .unknown)
        #expect(right.tag == 0)
        right.tag = 7
        #expect(right.tag == 7)
    }

    @Test func authorizeByPasscodeThenDeauthorizeIsObservedOnceInOrder() async throws {
        let world = try RightsWorld()
        try await world.run {
            let right = LARight()
            right.presenter = ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: ["secret"])
            let log = TransitionLog(right)
            let updates = right.stateUpdates
            try await right.authorize(localizedReason: "Show the account")
            #expect(right.state == .authorized)
            await right.deauthorize()
            #expect(right.state == .notAuthorized)
            await right.deauthorize()  // nothing more to do
            log.stop()
            var seen: [LARight.State] = []
            for await state in updates {
                seen.append(state)
                if seen.count == 3 { break }
            }
            #expect(seen == [.authorizing, .authorized, .notAuthorized])
            #expect(log.posted == ["posted authorized", "posted unauthorized"])
        }
        await world.close()
    }

    @Test func aFailedAuthorizationEndsNotAuthorizedAndANewRequestAuthorizes() async throws {
        let world = try RightsWorld()
        try await world.enroll("alice-1")
        try await world.run {
            let right = LARight(requirement: .biometry)
            right.presenter = ScriptedAuthenticationPresenter(fingerprintSteps: [.cancel])
            let log = TransitionLog(right)
            let updates = right.stateUpdates
            await #expect(throws: LAError.self) { try await right.authorize(localizedReason: "Log in") }
            #expect(right.state == .notAuthorized)
            right.presenter = ScriptedAuthenticationPresenter()
            let scan = world.scanSoon("alice-1")
            try await right.authorize(localizedReason: "Log in")
            await scan.value
            #expect(right.state == .authorized)
            log.stop()
            var seen: [LARight.State] = []
            for await state in updates {
                seen.append(state)
                if seen.count == 4 { break }
            }
            #expect(seen == [.authorizing, .notAuthorized, .authorizing, .authorized])
            #expect(log.posted == ["posted unauthorized", "posted authorized"])
        }
        await world.close()
    }

    @Test func aSecondAuthorizeJoinsTheOneInFlight() async throws {
        let world = try RightsWorld()
        try await world.enroll("alice-1")
        try await world.run {
            let right = LARight(requirement: .biometry)
            let presenter = ScriptedAuthenticationPresenter()
            right.presenter = presenter
            let updates = right.stateUpdates
            async let first: Void = right.authorize(localizedReason: "one")
            // The second starts while the first waits for a finger; joining leaves nothing to wait on, so the finger
            // comes after a grace period.
            #expect(await waitUntil { !presenter.shownPrompts.isEmpty })
            async let second: Void = right.authorize(localizedReason: "two")
            try await Task.sleep(for: .milliseconds(100))
            try await world.socket.send("SCAN alice-1")
            try await first
            try await second
            #expect(right.state == .authorized)
            #expect(presenter.shownPrompts.count == 1)
            try await right.authorize(localizedReason: "already")  // returns at once
            await right.deauthorize()
            var seen: [LARight.State] = []
            for await state in updates {
                seen.append(state)
                if seen.count == 3 { break }
            }
            #expect(seen == [.authorizing, .authorized, .notAuthorized])
        }
        await world.close()
    }

    @Test func deauthorizeDuringAnAuthorizationCancelsIt() async throws {
        let world = try RightsWorld()
        try await world.enroll("alice-1")
        try await world.run {
            let right = LARight(requirement: .biometry)
            let presenter = ScriptedAuthenticationPresenter()
            right.presenter = presenter
            let log = TransitionLog(right)
            let updates = right.stateUpdates
            async let attempt: Void = right.authorize(localizedReason: "Log in")
            // Deauthorized while the attempt waits for a finger: once its prompt is shown.
            #expect(await waitUntil { !presenter.shownPrompts.isEmpty })
            #expect(right.state == .authorizing)
            await right.deauthorize()
            do {
                try await attempt
                Issue.record("the authorization survived deauthorize()")
            } catch LAError.appCancel {
            } catch {
                Issue.record("unexpected \(error)")
            }
            #expect(right.state == .notAuthorized)
            log.stop()
            var seen: [LARight.State] = []
            for await state in updates {
                seen.append(state)
                if seen.count == 2 { break }
            }
            #expect(seen == [.authorizing, .notAuthorized])
            #expect(log.posted == ["posted unauthorized"])
        }
        await world.close()
    }

    @Test func checkCanAuthorizeReportsMissingEnrollmentWithoutPrompting() async throws {
        let world = try RightsWorld()
        try await world.run {
            let right = LARight(requirement: .biometry)
            let presenter = ScriptedAuthenticationPresenter()
            right.presenter = presenter
            do {
                try await right.checkCanAuthorize()
                Issue.record("a biometric right was authorizable without an enrolled finger")
            } catch LAError.biometryNotEnrolled {
            } catch {
                Issue.record("unexpected \(error)")
            }
            try await LARight().checkCanAuthorize()
            #expect(presenter.shownPrompts.isEmpty)
            #expect(right.state == .unknown)
            let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                right.checkCanAuthorize { continuation.resume(returning: $0 == nil) }
            }
            #expect(outcome == false)
        }
        await world.close()
    }

    @Test func callbackFormsAuthorizeAndDeauthorize() async throws {
        let world = try RightsWorld()
        try await world.run {
            let right = LARight(requirement: .biometry(fallback: .devicePasscode))
            right.presenter = ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: ["secret"])
            let error = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                right.authorize(localizedReason: "Log in") { continuation.resume(returning: $0.map { "\($0)" }) }
            }
            #expect(error == nil)
            #expect(right.state == .authorized)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                right.deauthorize { continuation.resume() }
            }
            #expect(right.state == .notAuthorized)
        }
        await world.close()
    }
}
