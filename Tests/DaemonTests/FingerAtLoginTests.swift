import Foundation
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

/// Issue 49: what localauthd answers `pam_localauth.so finger` (the module's `fingerOffered` and `verifyFinger`
/// login steps, sent here as the module sends them, from a connection of the user being authenticated).
@Suite("pam_localauth's finger: localauthd's answers", .serialized, .daemonReaderTurn(timeLimit: .seconds(240)))
struct FingerAtLoginTests {
    /// Offered only once a print is enrolled; an enrolled finger matches, another does not; five failures lock
    /// the finger out, and then it is not offered (the password prompt comes at once).
    @Test func aFingerIsOfferedWithPrintsMatchesOnlyAnEnrolledOneAndLocksOutAfterFiveFailures() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        let before = try await client.send(LoginRequest.fingerOffered)
        #expect(before.finger == .notOffered && before.note?.contains("enrolled") == true, "\(before)")
        _ = try await enrollThroughRequests(client, socket: world.reader, printID: "alice-1", finger: .rightIndex)
        #expect(try await client.send(LoginRequest.fingerOffered).finger == .offered)

        async let matched = client.send(LoginRequest.verifyFinger)
        try await world.reader.send("SCAN alice-1")
        #expect(try await matched.finger == .matched)

        var failures = 0
        while failures < 10, try await client.send(LoginRequest.fingerOffered).finger == .offered {
            async let stranger = client.send(LoginRequest.verifyFinger)
            try await world.reader.send("SCAN mallory")
            let answer = try await stranger
            #expect(answer.finger == .notMatched, "\(answer)")
            failures += 1
        }
        #expect(failures == 5, "the finger was offered after \(failures) failures")
        let lockedOut = try await client.send(LoginRequest.fingerOffered)
        #expect(lockedOut.finger == .notOffered && lockedOut.note?.contains("lock") == true, "\(lockedOut)")
        let refused = try await client.send(LoginRequest.verifyFinger)
        #expect(refused.finger == .notOffered, "a verify while locked out waits for no finger: \(refused)")
    }

    /// A module that stops waiting (the password came first; its process is killed) frees the reader: the next
    /// verify takes the finger.
    @Test func aVerifyWhoseConnectionClosesFreesTheReader() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try await enrollThroughRequests(client, socket: world.reader, printID: "alice-1", finger: .rightIndex)
        let leaving = try world.daemon.client()
        let abandoned = Task { try? await leaving.send(LoginRequest.verifyFinger) }
        #expect(
            await waitUntil(within: .seconds(60)) { world.daemon.logText.contains("login finger: waiting") },
            "the verify began: \(world.daemon.logText.suffix(2000))")
        leaving.disconnect()
        _ = await abandoned.value
        #expect(
            await waitUntil(within: .seconds(60)) { world.daemon.logText.contains("cancelled=1") },
            "the daemon cancelled the verify: \(world.daemon.logText.suffix(2000))")
        async let matched = client.send(LoginRequest.verifyFinger)
        try await world.reader.send("SCAN alice-1")
        #expect(try await matched.finger == .matched)
    }
}
