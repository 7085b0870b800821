import Foundation
import TestSupport
import Testing

/// `lactl demo` end to end: its fingerprint and passcode steps go through the engine's client requests.
@Suite("lactl demo")
struct LactlDemoTests {
    @Test func theDemoRunsEveryStepOnRealParts() throws {
        var environment = inheritedEnvironment()
        environment["LA_PRESENTER"] = "none"
        let (status, text) = try runCapturingOutput(try lactlExecutable(), ["demo"], environment: environment)
        #expect(status == 0, "\(text)")
        for line in [
            "Enrolling needs the passcode first, as on Apple's devices: PAM accepted it.",
            "The same finger on the reader: matched the enrolled print.",
            "Another finger: refused (LAError code -1, authenticationFailed).",
            "Enrolled a second finger: the state hash changed",
            "Even the right passcode right away is refused before PAM is asked",
            "Done.",
        ] {
            #expect(text.contains(line), "\(line) — in: \(text)")
        }
    }
}
