import Authenticators
import Foundation
import SecurityServer
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Runs each example program as a subprocess in a throwaway environment and checks what it prints.
///
/// The binaries are the ones `swift build --build-tests` put next to this test bundle. Serialized: each example
/// opens libfprint and PAM, and the machine has two cores.
@Suite(.serialized)
struct ExamplesTests {
    @Test func guardedOperationShowsTheAccountOnlyBetweenLoginAndLogout() throws {
        let world = try ExampleWorld()
        defer { world.remove() }
        let run = try world.run(
            "GuardedOperation",
            ["--passcode", "secret", "show-account", "login", "show-account", "logout", "show-account"])
        #expect(run.status == 0, "\(run)")
        #expect(
            run.lines == [
                "show-account: refused, log in first",
                "login: authorized",
                "show-account: Alice Example, DE89 3704 0044 0532 0130 00, balance 1 234,56 EUR",
                "logout: done",
                "show-account: refused, log in first",
            ], "\(run)")
        if let daemon = try world.daemon.engine() {
            // The example reached the daemon: its store is the daemon's, and none was opened beside the world.
            #expect(
                FileManager.default.fileExists(atPath: daemon.storeDirectory.appendingPathComponent("keychain.db").path)
            )
            #expect(!FileManager.default.fileExists(atPath: world.directory + "/store/keychain.db"))
        }
    }

    @Test func guardedOperationStaysLoggedOutAfterAWrongPasscode() throws {
        let world = try ExampleWorld()
        defer { world.remove() }
        let run = try world.run("GuardedOperation", ["--passcode", "wrong", "login", "show-account", "state"])
        #expect(run.status == 0, "\(run)")
        #expect(run.lines.first?.hasPrefix("login: failed") == true, "\(run)")
        #expect(Array(run.lines.dropFirst()) == ["show-account: refused, log in first", "state: notAuthorized"])
    }

    @Test func rightObserverPrintsEveryTransitionOfEveryRight() throws {
        let world = try ExampleWorld()
        defer { world.remove() }
        let run = try world.run("RightObserver", ["--passcodes", "secret,wrong,-"])
        #expect(run.status == 0, "\(run)")
        #expect(
            run.lines.filter { $0.hasPrefix("observer:") } == [
                "observer: right 1 (documents) became authorized",
                "observer: right 2 (payments) became unauthorized",
                "observer: right 3 (settings) became unauthorized",
                "observer: right 1 (documents) became unauthorized",
            ], "\(run)")
    }

    @Test(.embeddedOnly("the demo sets up its own throwaway store, reader and PAM service inside its process"))
    func challengeSigningDemoSignsTwiceThenRefusesAfterTheEnrollmentChange() throws {
        let world = try ExampleWorld()
        defer { world.remove() }
        let run = try world.run("ChallengeSigning", ["demo"])
        #expect(run.status == 0, "\(run)")
        #expect(run.lines.filter { $0.hasSuffix("200 verified.") }.count == 2, "\(run)")
        #expect(run.lines.contains { $0.contains("signing before authorizing is refused") }, "\(run)")
        #expect(run.lines.contains { $0.contains("authorizing the right again is refused") }, "\(run)")
        #expect(
            run.lines.contains {
                $0.hasSuffix("replays challenge 2 with its signature: 401 rejected: unknown or reused challenge.")
            }, "\(run)")
        #expect(run.lines.contains { $0.hasSuffix("for a new challenge: 401 rejected: bad signature.") }, "\(run)")
        if ProcessInfo.processInfo.environment["LA_TEST_TPM_CA"] != nil {
            // Key attestation against the swtpm's CA: the key registers only through it, once.
            #expect(
                run.lines.contains { $0.hasSuffix("checked the certification: 201 registered a TPM-attested key.") },
                "\(run)")
            #expect(
                run.lines.contains {
                    $0.hasSuffix(
                        "replays that attestation for a new challenge: 401 rejected: the statement answers another challenge."
                    )
                }, "\(run)")
            #expect(
                run.lines.contains {
                    $0.hasSuffix("without attestation: 403 rejected: this server registers TPM-attested keys only.")
                }, "\(run)")
        }
    }

    @Test func challengeSigningRejectsAnUnknownMode() throws {
        let world = try ExampleWorld()
        defer { world.remove() }
        let run = try world.run("ChallengeSigning", ["serve-forever"])
        #expect(run.status == 2)
        #expect(run.output.contains("usage: ChallengeSigning [demo]"))
    }
}

/// A throwaway store and a PAM service (pam_matrix; the current user's passcode is `secret`), no fingerprint reader;
/// in daemon mode a `localauthd` of the world's own serves the store and the examples reach it by `LA_DAEMON_SOCKET`.
struct ExampleWorld {
    static let pamModule = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"

    /// The directory holding the store and the PAM files.
    let directory: String
    /// The store's daemon (daemon mode).
    let daemon: StoreDaemon

    /// What a finished example printed and how it exited.
    struct Run: CustomStringConvertible {
        var status: Int32
        var output: String
        var errorOutput: String
        var description: String { "exit \(status)\n--- stdout\n\(output)--- stderr\n\(errorOutput)" }
        var lines: [String] { output.split(separator: "\n").map(String.init) }
    }

    init() throws {
        var template = Array("/tmp/la-examples-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        directory = String(cString: made)
        let user = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) } ?? "root"
        let passdb = directory + "/passdb"
        // No blank lines: pam_matrix stops at them.
        try "\(user):secret:la-examples\n".write(toFile: passdb, atomically: true, encoding: .utf8)
        try "auth required \(Self.pamModule) passdb=\(passdb)\naccount required \(Self.pamModule) passdb=\(passdb)\n"
            .write(toFile: directory + "/la-examples", atomically: true, encoding: .utf8)
        let directory = directory
        daemon = StoreDaemon {
            try TestEngine(
                storeDirectory: URL(fileURLWithPath: directory + "/store"), scratch: directory + "/daemon",
                authentication: AuthenticationConfiguration(
                    stateDirectory: directory + "/store", username: user,
                    passcode: .init(service: "la-examples", configurationDirectory: directory),
                    readerDrivers: ["no_such_driver"]))
        }
    }

    /// Where `swift build` put the example binaries: next to this test bundle.
    static var binDirectory: URL {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        // Inside `<bin>/<package>PackageTests.xctest` on some layouts.
        while directory.pathExtension == "xctest" || directory.lastPathComponent == "MacOS" {
            directory.deleteLastPathComponent()
        }
        return directory
    }

    /// Runs `example` with `arguments` in this world's environment, killing it after `timeout`.
    func run(_ example: String, _ arguments: [String], timeout: TimeInterval = 45) throws -> Run {
        let process = Process()
        process.executableURL = Self.binDirectory.appendingPathComponent(example)
        process.arguments = arguments
        var environment = inheritedEnvironment()
        if let daemon = try daemon.engine() {
            environment = daemon.subprocessEnvironment()
        } else {
            environment["LA_DATA_DIR"] = directory + "/store"
            environment["LA_PAM_SERVICE"] = "la-examples"
            environment["LA_PAM_CONFDIR"] = directory
        }
        // The TPM pass's swtpm has an endorsement certificate from a throwaway CA: ChallengeSigning's server trusts it.
        if let ca = environment["LA_TEST_TPM_CA"] { environment["CHALLENGE_SIGNING_TPM_CA"] = ca }
        environment["LA_READER_DRIVERS"] = "no_such_driver"
        environment["FP_DRIVERS_WHITELIST"] = "no_such_driver"
        environment["LA_PRESENTER"] = "none"
        process.environment = environment
        // Standard output is what the test checks; the library's log lines go to standard error, kept in a file.
        let output = Pipe()
        let errorLog = directory + "/\(example).stderr"
        _ = FileManager.default.createFile(atPath: errorLog, contents: nil)
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errorLog)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        let log = FileManager.default.contents(atPath: errorLog).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return Run(
            status: process.terminationStatus, output: String(decoding: data, as: UTF8.self), errorOutput: log)
    }

    func remove() {
        daemon.stop()
        forgetUnlockedKeys(ofStoreIn: URL(fileURLWithPath: directory + "/store"))
        try? FileManager.default.removeItem(atPath: directory)
    }
}
