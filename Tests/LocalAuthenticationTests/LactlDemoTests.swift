import Foundation
import Testing
import TestSupport

/// `lactl demo` end to end: its fingerprint and passcode steps go through the engine's client requests.
@Suite("lactl demo")
struct LactlDemoTests {
    @Test func theDemoRunsEveryStepOnRealParts() throws {
        let process = Process()
        process.executableURL = try lactlExecutable()
        process.arguments = ["demo"]
        var environment = ProcessInfo.processInfo.environment
        environment["LA_PRESENTER"] = "none"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
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
