import Foundation
import SecurityClient
import SecurityProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A real `localauthd` process for a test: its own socket and state directory under `directory`, the environment
/// given (PAM service and configuration directory, the virtual reader), its log in `directory/localauthd.log`.
package final class DaemonProcess: @unchecked Sendable {
    // Safe to share: `process` is set once and only read; Process's own methods are thread-safe.
    package let socket: String
    package let stateDirectory: String
    package let log: String
    private let process: Process

    /// Starts the daemon and waits until its socket accepts connections (at most 20 s).
    ///
    /// - Throws: when the executable is missing or the daemon does not come up.
    package init(directory: String, environment: [String: String] = [:]) throws {
        socket = directory + "/localauthd.sock"
        stateDirectory = directory + "/daemon-state"
        log = directory + "/localauthd.log"
        process = Process()
        process.executableURL = try builtExecutable("localauthd")
        process.arguments = ["--socket", socket, "--state-directory", stateDirectory, "--log-level", "debug"]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        output.seekToEndOfFile()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? SocketClient(path: socket, accessGroups: [])) != nil { return }
            guard process.isRunning else { break }
            usleep(50_000)
        }
        process.terminate()
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "localauthd did not start"])
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// A client of this daemon claiming `accessGroups`, prompting through `presenter`.
    package func client(
        accessGroups: [String] = ["test.daemon"], allGroups: Bool = false,
        presenter: (any EvaluationPresenter)? = nil
    ) throws -> SocketClient {
        try SocketClient(path: socket, accessGroups: accessGroups, allGroups: allGroups, defaultPresenter: presenter)
    }

    /// Sends `signal` and waits for the exit; returns how it ended (the exit status, or the signal's number).
    @discardableResult
    package func stop(_ signal: Int32 = SIGTERM) -> (status: Int32, bySignal: Bool) {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    /// Whether the daemon still runs.
    package var isRunning: Bool { process.isRunning }
}
