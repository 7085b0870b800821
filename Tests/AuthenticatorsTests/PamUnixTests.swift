import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Authenticators

#if canImport(Glibc)
    import Glibc
#endif

/// The passcode authenticator against the real `pam_unix` with a throwaway local user (root only: creating users
/// and reading /etc/shadow need it).
@Suite("Passcode authentication through pam_unix with a real user")
struct PamUnixTests {
    static let isRoot = getuid() == 0

    @Test(.enabled(if: isRoot, "needs root to create a throwaway user"))
    func realUserAuthenticatesWithItsPasswordAndFailsWithAnotherWithoutPAMsFailDelay() async throws {
        let suffix = UInt32.random(in: 0...UInt32.max)
        let user = "latst\(String(suffix, radix: 16))"
        let password = "Pw-\(UInt64.random(in: 0...UInt64.max))"
        try runTool("/usr/sbin/useradd", ["-M", "-s", "/usr/sbin/nologin", user])
        // Removed even when an expectation or a PAM call below fails.
        defer { _ = try? runTool("/usr/sbin/userdel", [user]) }
        try runTool("/usr/sbin/chpasswd", [], input: "\(user):\(password)\n")

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try "auth     required  pam_unix.so nodelay\naccount  required  pam_unix.so\n"
            .write(toFile: directory.path + "/la-unix", atomically: true, encoding: .utf8)
        // Without `nodelay`, pam_unix asks libpam for a ~2 s delay after a failure; our PAM_FAIL_DELAY hook skips it.
        try "auth     required  pam_unix.so\naccount  required  pam_unix.so\n"
            .write(toFile: directory.path + "/la-unix-delay", atomically: true, encoding: .utf8)
        let authenticator = PasscodeAuthenticator(
            configuration: .init(service: "la-unix", configurationDirectory: directory.path), policy: nil)

        try await authenticator.authenticate(user: user, presenter: ScriptedPresenter(passcode: password))
        #expect(try await authenticator.isPasscodeSet(user: user))

        let wrong = await authenticationError {
            try await authenticator.authenticate(user: user, presenter: ScriptedPresenter(passcode: password + "x"))
        }
        #expect(wrong?.code == .authenticationFailed)
        #expect(wrong?.backendStatus == .init(library: "pam", code: 7))

        let unknown = await authenticationError {
            try await authenticator.authenticate(
                user: user + "nobody", presenter: ScriptedPresenter(passcode: password))
        }
        #expect(unknown?.code == .authenticationFailed)

        let delaying = PasscodeAuthenticator(
            configuration: .init(service: "la-unix-delay", configurationDirectory: directory.path), policy: nil)
        pamSkippedFailDelay.store(0, ordering: .relaxed)
        let delayed = await authenticationError {
            try await delaying.authenticate(user: user, presenter: ScriptedPresenter(passcode: "wrong"))
        }
        #expect(delayed?.code == .authenticationFailed)
        // libpam hands pam_unix's 2 s, randomised by up to a quarter, to the PAM_FAIL_DELAY hook instead of sleeping
        // it. No wall-clock bound: these machines are shared, and one yescrypt check alone takes 0.1-0.9 s.
        let skipped = pamSkippedFailDelay.load(ordering: .relaxed)
        #expect(
            (1_000_000...3_000_000).contains(skipped), "libpam did not hand its fail delay to our hook: \(skipped) µs")
    }

    @discardableResult
    /// Runs a tool that edits the user database, one at a time with the other suites' (``UserDatabase``).
    private func runTool(_ path: String, _ arguments: [String], input: String? = nil) throws -> Int32 {
        try UserDatabase.editing { try runToolUnlocked(path, arguments, input: input) }
    }

    private func runToolUnlocked(_ path: String, _ arguments: [String], input: String?) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let stdin = Pipe()
        if input != nil { process.standardInput = stdin }
        try process.run()
        if let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try stdin.fileHandleForWriting.close()
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw VirtualReaderSocket.Failure(description: "\(path) \(arguments) exited \(process.terminationStatus)")
        }
        return process.terminationStatus
    }
}
