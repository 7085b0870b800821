import Foundation
import LocalAuthentication
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

/// fprintd as the reader's owner (issue 37), on the fprintd pass only: what other tools do through fprintd is seen
/// by us, and what we do leaves fprintd usable by them. Each world runs a real fprintd with libfprint's virtual
/// storage device and polkitd on a bus of its own (``FprintdStack``); prints are enrolled with Debian's
/// `fprintd-enroll` and checked with `fprintd-verify`, as a desktop's tools would.
@Suite(
    "fprintd backend", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: TestBiometry.current == .fprintd, "the fprintd pass runs these (LA_TEST_BIOMETRY=fprintd)"))
struct FprintdBackendTests {
    /// A print enrolled with `fprintd-enroll` (not through us) unlocks our `.biometryCurrentSet` right; enrolling
    /// the same finger again with the same print through `fprintd-enroll` — identical bytes, a new file — retires
    /// it for good, while fprintd-verify keeps matching the finger.
    @Test func aReEnrollmentThroughFprintdEnrollRetiresACurrentSetRight() async throws {
        let world = try RightsWorld()
        defer { Task { await world.close() } }
        let fprintd = try #require(world.reader.fprintd)
        let enrolled = try fprintd.enroll(finger: "right-index-finger", user: world.user, id: "alice-1")
        #expect(enrolled.status == 0, "\(enrolled.output)")
        try await world.run {
            let right = try await LARightStore.shared.saveRight(
                LARight(requirement: .biometryCurrentSet), identifier: "fprintd-set", secret: Data("s".utf8))
            right.presenter = ScriptedAuthenticationPresenter()
            let scan = world.scanSoon("alice-1")
            try await right.authorize(localizedReason: "Sign")
            await scan.value
            #expect(right.state == .authorized)
            await right.deauthorize()
        }
        let again = try fprintd.enroll(finger: "right-index-finger", user: world.user, id: "alice-1")
        #expect(again.status == 0, "\(again.output)")
        try await world.run {
            let right = try await LARightStore.shared.right(forIdentifier: "fprintd-set")
            right.presenter = ScriptedAuthenticationPresenter()
            do {
                try await right.authorize(localizedReason: "Sign")
                Issue.record("authorized after the finger was enrolled again")
            } catch let error as LAError {
                #expect(error.localizedDescription.contains("invalidated"), "\(error)")
            }
        }
        let verified = try fprintd.verifyWithTool(user: world.user, id: "alice-1")
        #expect(verified.status == 0 && verified.output.contains("verify-match"), "\(verified.output)")
    }

    /// After each of our verifications — a match, a finger that matches nothing, one cancelled while waiting —
    /// fprintd's own `fprintd-verify` claims the reader at once and matches: we released it on every path.
    @Test func fprintdVerifyWorksRightAfterEachOfOurVerifications() async throws {
        let world = try RightsWorld()
        defer { Task { await world.close() } }
        let fprintd = try #require(world.reader.fprintd)
        #expect(try fprintd.enroll(finger: "left-thumb", user: world.user, id: "alice-t").status == 0)
        try await world.run {
            for (scan, expected) in [("alice-t", nil), ("mallory", LAError.Code.authenticationFailed)] {
                let context = LAContext()
                context.presenter = ScriptedAuthenticationPresenter()
                let feeding = world.scanSoon(scan)
                do {
                    _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
                    #expect(expected == nil, "\(scan) matched")
                } catch let error as LAError {
                    #expect(error.code == expected, "\(scan): \(error)")
                }
                await feeding.value
                let verified = try fprintd.verifyWithTool(user: world.user, id: "alice-t")
                #expect(verified.status == 0, "after \(scan): \(verified.output)")
            }
            // Cancelled by the app while fprintd waits for a finger.
            let context = LAContext()
            context.presenter = ScriptedAuthenticationPresenter()
            let evaluation = Task {
                try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
            }
            try await Task.sleep(for: .milliseconds(500))
            context.invalidate()
            await #expect(throws: LAError.self) { _ = try await evaluation.value }
        }
        let verified = try fprintd.verifyWithTool(user: world.user, id: "alice-t")
        #expect(verified.status == 0, "after a cancel: \(verified.output)")
    }

    /// A program SIGKILLed while fprintd waits for its finger leaves no claim behind: fprintd releases the device of
    /// a bus connection that closed, and `fprintd-verify` then claims it and matches. In the daemon pass the program
    /// is a client of localauthd, and localauthd itself is killed mid-scan next.
    @Test func aProgramOrTheDaemonKilledMidScanLeavesTheReaderToOthers() async throws {
        let world = try RightsWorld()
        defer { Task { await world.close() } }
        let fprintd = try #require(world.reader.fprintd)
        #expect(try fprintd.enroll(finger: "left-thumb", user: world.user, id: "alice-t").status == 0)

        /// Starts `lactl biometry verify` and waits until it asks for a finger (fprintd holds the claim then).
        func waitingVerifier() async throws -> SpawnedProcess {
            let log = world.directory + "/verify-\(UUID().uuidString).log"
            // Embedded, the world's user's prints; through localauthd, the daemon checks this process's user.
            let arguments = ["biometry", "verify"] + (world.engine.daemon == nil ? ["--user", world.user] : [])
            let verifier = try SpawnedProcess(
                try lactlExecutable().path, arguments, environment: world.subprocessEnvironment(), log: log)
            let asking = await waitUntil(within: .seconds(20)) {
                ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("Place your finger")
            }
            #expect(asking, "lactl waits for a finger: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            return verifier
        }
        /// Whether `fprintd-verify` claims the reader and matches within 15 s: well before the world's 20 s attempt
        /// timeout would end the scan anyway (fprintd releases a vanished client's claim asynchronously). Prints how
        /// long it took.
        func othersGetTheReader(after what: String) async throws -> Bool {
            var last = ""
            let start = ContinuousClock.now
            let released = try await waitUntil(within: .seconds(15)) {
                let verified = try fprintd.verifyWithTool(user: world.user, id: "alice-t")
                last = verified.output
                return verified.status == 0
            }
            print("fprintd: the reader was free \(ContinuousClock.now - start) after \(what)")
            if !released {
                let daemonLog = world.engine.daemon.map { String($0.logText.suffix(3000)) } ?? "(embedded)"
                Issue.record("fprintd-verify: \(last)\nlocalauthd's log ends: \(daemonLog)")
            }
            return released
        }

        let verifier = try await waitingVerifier()
        _ = verifier.stop(SIGKILL)
        #expect(try await othersGetTheReader(after: "lactl was killed mid-scan"))

        guard let daemon = world.engine.daemon else { return }  // embedded: lactl was the engine
        let client = try await waitingVerifier()
        _ = daemon.stop(SIGKILL)
        #expect(try await othersGetTheReader(after: "localauthd was killed mid-scan"))
        _ = client.stop(SIGKILL)
    }
}
