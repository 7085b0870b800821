import AppRegistry
import Foundation
import SecurityClient
import SecurityProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// A real `localauthd` process for a test: its own socket, state and configuration directories under `directory`,
/// the environment given (PAM service and configuration directory, the virtual reader), its log in
/// `directory/localauthd.log`.
package final class DaemonProcess: @unchecked Sendable {
    // Safe to share: every field is set once.
    package let socket: String
    package let stateDirectory: String
    /// The app registry the daemon reads (`<config>/apps.d`).
    package let registryDirectory: String
    package let log: String
    private let process: SpawnedProcess

    /// Starts the daemon and waits until its socket accepts connections (at most 20 s). The registry holds
    /// `registrations` (file name → registration); by default the test runner and `lactl`, as administrative
    /// tools: the suites act for many apps from one process, as `lactl` does for people. Unless `environment`
    /// says otherwise (``enforcingAdministrativeClaims``), the daemon grants administrative tools what they claim
    /// without asking the user (`LA_ADMINISTRATIVE_CLAIMS=trusted`), which the suites' own process needs. The exec
    /// record is off (`LA_EXEC_RECORD=no`) unless `environment` turns it on: the suites run many daemons at once that
    /// register the same files (`lactl`), and an exec has one tracer, so a second daemon's record of it fails
    /// (``ExecRecordTests`` turn it on, one daemon at a time).
    ///
    /// - Throws: when the executable is missing or the daemon does not come up.
    package init(
        directory: String, environment: [String: String] = [:],
        registrations: [String: AppRegistration]? = nil
    ) throws {
        socket = directory + "/localauthd.sock"
        stateDirectory = directory + "/daemon-state"
        registryDirectory = directory + "/config/apps.d"
        log = directory + "/localauthd.log"
        try FileManager.default.createDirectory(atPath: registryDirectory, withIntermediateDirectories: true)
        for (name, registration) in try registrations ?? Self.administrativeTools() {
            try Self.register(registration, as: name, in: registryDirectory)
        }
        process = try SpawnedProcess(
            try builtExecutable("localauthd").path,
            [
                "--socket", socket, "--state-directory", stateDirectory, "--config-directory", directory + "/config",
                "--log-level", "debug",
            ],
            environment: ["LA_ADMINISTRATIVE_CLAIMS": "trusted", "LA_EXEC_RECORD": "no"].merging(environment) { $1 },
            log: log)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            // Up once a hello is answered: welcomed, or refused (this user's store may not open, a test's point).
            do {
                _ = try SocketClient(path: socket, accessGroups: [])
                return
            } catch let status as KeychainStatus where status.message.hasPrefix("localauthd refused the connection") {
                return
            } catch {}
            guard process.isRunning else { break }
            usleep(50_000)
        }
        process.stop(SIGKILL)
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "localauthd did not start"])
    }

    /// The daemon's environment as installed: what an administrative tool claims beyond its own groups waits for
    /// the user's finger or passcode on its connection.
    package static let enforcingAdministrativeClaims = ["LA_ADMINISTRATIVE_CLAIMS": "authenticated"]

    /// The test runner (this process's executable), `lactl` and `keychain-stress` (the suites' second process,
    /// which acts for the group its arguments name), registered as administrative tools.
    ///
    /// - Throws: when `lactl` is not built.
    package static func administrativeTools() throws -> [String: AppRegistration] {
        var tools = [
            "test-runner.conf": AppRegistration(
                applicationIdentifier: "localtest.runner", executable: try runningExecutable(), isAdministrative: true),
            "lactl.conf": AppRegistration(
                applicationIdentifier: "localtest.lactl",
                executable: (try builtExecutable("lactl").path as NSString).resolvingSymlinksInPath,
                isAdministrative: true),
        ]
        if let stress = try? builtExecutable("keychain-stress") {
            tools["keychain-stress.conf"] = AppRegistration(
                applicationIdentifier: "localtest.stress",
                executable: (stress.path as NSString).resolvingSymlinksInPath,
                isAdministrative: true)
        }
        return tools
    }

    /// Writes `registration` as `name` in `directory` (0644, as an administrator would).
    ///
    /// - Throws: when the file cannot be written.
    package static func register(_ registration: AppRegistration, as name: String, in directory: String) throws {
        let path = directory + "/" + name
        try Data(registration.fileContents.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
    }

    /// The canonical path of this process's executable (`/proc/self/exe`).
    ///
    /// - Throws: when `/proc/self/exe` cannot be read.
    package static func runningExecutable() throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    /// A client of this daemon claiming `accessGroups`, prompting through `presenter`.
    package func client(
        accessGroups: [String] = ["test.daemon"], allGroups: Bool = false,
        presenter: (any EvaluationPresenter)? = nil
    ) throws -> SocketClient {
        try SocketClient(path: socket, accessGroups: accessGroups, allGroups: allGroups, defaultPresenter: presenter)
    }

    /// Sends `signal` and waits for the exit (at most 30 s, then SIGKILL); how it ended (the exit status, or the
    /// signal's number).
    @discardableResult
    package func stop(_ signal: Int32 = SIGTERM) -> (status: Int32, bySignal: Bool) {
        process.stop(signal)
    }

    /// Whether the daemon still runs.
    package var isRunning: Bool { process.isRunning }

    /// The daemon's process id.
    package var pid: pid_t { process.pid }

    /// Sends `signal` (SIGHUP: read the app registry again) without waiting.
    package func signal(_ signal: Int32) {
        kill(process.pid, signal)
    }

    /// The daemon's log so far.
    package var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
}
