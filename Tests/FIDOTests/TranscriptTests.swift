import Foundation
import TestSupport
import Testing

/// `scripts/fido-transcript`, which prints the README's passkey transcript, still runs end to end: a finger
/// enrolled with `lactl biometry enroll` (the passcode through PAM), `lactl fido serve`, python-fido2 registering a
/// passkey and signing in with it (its server checks both), `lactl fido list`.
@Suite("FIDO: the README's transcript", .daemonReaderTurn(timeLimit: .seconds(600)))
struct TranscriptTests {
    @Test func theTranscriptScriptRegistersAndSignsIn() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/fido-transcript")
        let (status, output) = try await runCapturingOutput(script, [try lactlExecutable().path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("Enrolled right-index as"), "\(output)")
        #expect(output.contains("example.test wants to make a passkey for alice"), "\(output)")
        #expect(output.contains("\"counter\": 1") && output.contains("\"user\": \"alice\""), "\(output)")
        #expect(output.contains("passkey, fingers enrolled at creation\t1"), "\(output)")
    }
}
