import Foundation
import SecurityClient
import SecurityProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A real `localauthd` process for a test: its own socket and state directory under `directory`, the environment
/// given (PAM service and configuration directory, the virtual reader), its log in `directory/localauthd.log`.
package final class DaemonProcess: @unchecked Sendable {
    // Safe to share: every field is set once.
    package let socket: String
    package let stateDirectory: String
    package let log: String
    private let process: SpawnedProcess

    /// Starts the daemon and waits until its socket accepts connections (at most 20 s).
    ///
    /// - Throws: when the executable is missing or the daemon does not come up.
    package init(directory: String, environment: [String: String] = [:]) throws {
        socket = directory + "/localauthd.sock"
        stateDirectory = directory + "/daemon-state"
        log = directory + "/localauthd.log"
        process = try SpawnedProcess(
            try builtExecutable("localauthd").path,
            ["--socket", socket, "--state-directory", stateDirectory, "--log-level", "debug"],
            environment: environment, log: log)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? SocketClient(path: socket, accessGroups: [])) != nil { return }
            guard process.isRunning else { break }
            usleep(50_000)
        }
        process.stop(SIGKILL)
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "localauthd did not start"])
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
}
