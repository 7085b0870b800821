import Authenticators
import EmbeddedEngine
import Enclave
import Foundation
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Which client the suites' worlds use. `make test` runs the client-facing suites twice: `LA_TEST_MODE=embedded`
/// (the default) runs the engine inside the test process; `LA_TEST_MODE=daemon` starts a `localauthd` for every
/// world and sends every request over its socket.
package enum TestMode: String, Sendable {
    case embedded
    case daemon

    package static let current: TestMode =
        ProcessInfo.processInfo.environment["LA_TEST_MODE"] == TestMode.daemon.rawValue ? .daemon : .embedded
}

extension Trait where Self == ConditionTrait {
    /// Runs the test only in embedded mode. `reason` says what only an engine inside the test process gives the
    /// test (a clock it moves by hand, an evaluator it injects, the engine's internal state); the skip and the
    /// reason appear in the daemon pass's output.
    package static func embeddedOnly(_ reason: Comment) -> Self {
        .enabled(if: TestMode.current == .embedded, reason)
    }
}

/// The engine one test world talks to: embedded in the test process, or inside a `localauthd` started for the world
/// on a socket of its own, as the mode says. Clients of either kind are `any SecurityClient`.
package final class TestEngine: Sendable {
    /// Where the keychain store lives: the directory given (embedded) or the daemon's directory for this uid.
    package let storeDirectory: URL
    /// The embedded engine, for the tests that read its internal state (nil in daemon mode; such tests are
    /// `.embeddedOnly`).
    package let embeddedEngine: KeychainEngine?
    private let authentication: AuthenticationConfiguration
    private let defaultPresenter: (any EvaluationPresenter)?
    private let running: Mutex<DaemonProcess?>
    private let scratch: String
    private let environment: [String: String]

    /// The user a world should give pam_matrix a passcode for: `preferred` embedded, this process's user in daemon
    /// mode (the daemon checks the passcode of the user the kernel says is connected).
    package static func username(preferring preferred: String) -> String {
        TestMode.current == .daemon ? AuthenticationConfiguration.currentUsername() : preferred
    }

    /// An engine on `storeDirectory` configured by `authentication` (embedded mode), or a daemon in `scratch`
    /// whose environment names the same PAM service and readers (daemon mode; its state lives in `scratch`, the
    /// clock is the real one). Requests that bring no presenter prompt through `defaultPresenter`. `enclave`
    /// configures the embedded engine's enclave (by default the embedded client's: unlocked keys in the kernel
    /// keyring); the daemon configures its own.
    ///
    /// - Throws: when the store cannot be opened or the daemon does not start.
    package init(
        storeDirectory directory: URL, scratch: String, authentication: AuthenticationConfiguration,
        defaultPresenter: (any EvaluationPresenter)? = nil, enclave: EnclaveConfiguration? = nil
    ) throws {
        self.authentication = authentication
        self.defaultPresenter = defaultPresenter
        self.scratch = scratch
        switch TestMode.current {
        case .embedded:
            embeddedEngine = try KeychainEngine(directory: directory, authentication: authentication, enclave: enclave)
            running = Mutex(nil)
            environment = [:]
            storeDirectory = directory
        case .daemon:
            var environment = [String: String]()
            let inherited = ProcessInfo.processInfo.environment
            for name in ["FP_DRIVERS_WHITELIST", "FP_VIRTUAL_DEVICE", "FP_VIRTUAL_DEVICE_STORAGE", "LD_LIBRARY_PATH"] {
                if let value = inherited[name] { environment[name] = value }
            }
            environment["LA_PAM_SERVICE"] = authentication.passcode.service
            environment["LA_PAM_CONFDIR"] = authentication.passcode.configurationDirectory
            environment["LA_READER_DRIVERS"] = authentication.readerDrivers?.joined(separator: ",")
            switch authentication.biometryBackend {
            case .libfprint: environment["LA_BIOMETRY_BACKEND"] = "libfprint"
            case .fprintd(let address, let prints):
                environment["LA_BIOMETRY_BACKEND"] = "fprintd"
                environment["LA_FPRINTD_BUS"] = address
                environment["LA_FPRINTD_PRINTS"] = prints
            }
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            let daemon = try DaemonProcess(directory: scratch, environment: environment)
            self.environment = environment
            running = Mutex(daemon)
            embeddedEngine = nil
            storeDirectory = URL(fileURLWithPath: daemon.stateDirectory + "/\(getuid())", isDirectory: true)
        }
    }

    /// Embedded or daemon.
    package var mode: TestMode { embeddedEngine == nil ? .daemon : .embedded }

    /// A client for a caller claiming `accessGroups`: another caller of the same embedded engine, or a new
    /// connection to the daemon.
    ///
    /// - Throws: when the daemon cannot be reached.
    package func client(
        accessGroups: [String], allGroups: Bool = false, presenter: (any EvaluationPresenter)? = nil
    ) throws -> any SecurityClient {
        let presenter = presenter ?? defaultPresenter
        if let embeddedEngine {
            return EmbeddedClient(
                engine: embeddedEngine,
                caller: CallerIdentity(accessGroups: accessGroups, mayAccessAllGroups: allGroups),
                defaultPresenter: presenter)
        }
        return try daemon!.client(accessGroups: accessGroups, allGroups: allGroups, presenter: presenter)
    }

    /// The running daemon (daemon mode).
    package var daemon: DaemonProcess? { running.withLock { $0 } }

    /// A client as a program sees the store after a restart: a new embedded engine opened on the same store, or
    /// (daemon mode) the daemon stopped with SIGTERM and started again on the same state. Earlier daemon clients
    /// reconnect on their next request.
    ///
    /// - Throws: when the store cannot be opened or the daemon does not start again.
    package func restartedClient(
        accessGroups: [String], presenter: (any EvaluationPresenter)? = nil
    ) throws -> any SecurityClient {
        let presenter = presenter ?? defaultPresenter
        guard mode == .daemon else {
            return try EmbeddedClient(
                configuration: EmbeddedConfiguration(dataDirectory: storeDirectory, accessGroups: accessGroups),
                authentication: authentication, defaultPresenter: presenter)
        }
        let restarted = try running.withLock { running in
            if let old = running, old.isRunning { old.stop() }
            running = try DaemonProcess(directory: scratch, environment: environment)
            return running!
        }
        return try restarted.client(accessGroups: accessGroups, presenter: presenter)
    }

    /// The environment for a subprocess (`lactl`, an example, the SSH agent) that must reach this engine's store:
    /// this process's, plus `LA_DAEMON_SOCKET` in daemon mode or `LA_DATA_DIR` and the PAM service embedded.
    package func subprocessEnvironment() -> [String: String] {
        var environment = inheritedEnvironment()
        if let daemon {
            environment["LA_DAEMON_SOCKET"] = daemon.socket
        } else {
            environment["LA_DATA_DIR"] = storeDirectory.path
            environment["LA_PAM_SERVICE"] = authentication.passcode.service
            environment["LA_PAM_CONFDIR"] = authentication.passcode.configurationDirectory
        }
        return environment
    }

    /// Stops the daemon (daemon mode); the reader is free afterwards.
    package func stop() {
        if let daemon, daemon.isRunning { daemon.stop() }
    }

    deinit { stop() }
}

/// The daemon of a test store that opens embedded engines of its own (one per client, as separate programs do):
/// in daemon mode a ``TestEngine`` started on first use and stopped with the store; nil embedded.
package final class StoreDaemon: Sendable {
    private let started = Mutex<TestEngine?>(nil)
    private let start: @Sendable () throws -> TestEngine

    /// `start` makes the daemon when the first client asks for it.
    package init(_ start: @escaping @Sendable () throws -> TestEngine) {
        self.start = start
    }

    /// The daemon (started now if needed), or nil in embedded mode.
    ///
    /// - Throws: when the daemon does not start.
    package func engine() throws -> TestEngine? {
        guard TestMode.current == .daemon else { return nil }
        return try started.withLock { started in
            if let started { return started }
            let made = try start()
            started = made
            return made
        }
    }

    /// Stops the daemon if one was started.
    package func stop() {
        started.withLock { $0 }?.stop()
    }
}

/// Takes the unlocked keys of the store in `directory` out of the user's kernel keyring before a test deletes the
/// store: otherwise each embedded test store leaves them there, and a user other than root (200 keys) runs out after
/// a few runs of the suites. Nothing happens when `directory` holds no store.
package func forgetUnlockedKeys(ofStoreIn directory: URL) {
    guard FileManager.default.fileExists(atPath: directory.appendingPathComponent("keybag").path) else { return }
    (try? Enclave(directory: directory))?.forgetUnlockedKeys()
}
