import ArgumentParser
import Foundation
import Logging
import SecurityDaemon
import ServiceLifecycle
import UnixSignals

/// `localauthd`: the engine in its own process. It owns every user's store, keys, attempt counters and the reader,
/// serves the message protocol on a Unix socket, and tells callers apart by the kernel's peer credentials.
@main
struct LocalAuthDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "localauthd",
        abstract: "Serves LocalAuthentication and Keychain Services to the programs of every user of this machine.",
        discussion: """
            One store per user under the state directory (<dir>/<uid>), opened on first use. PAM, readers and
            timeouts come from the environment as for the embedded client (LA_PAM_SERVICE, LA_PAM_CONFDIR,
            LA_READER_DRIVERS). SIGTERM stops it gracefully: requests in flight finish first.
            """)

    @Option(help: "The listening socket.") var socket = "/run/localauthd/socket"
    @Option(help: "Where each user's store lives (<dir>/<uid>).") var stateDirectory = "/var/lib/localauthd"
    @Option(help: "Configuration directory (reserved for trusted-application lists).") var configDirectory =
        "/etc/localauthd"
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

    func run() async throws {
        // A daemon starts with the signals it stops on deliverable, whatever mask and dispositions the program that
        // started it had (a thread of a test runner or of a launcher may block them, and children inherit both).
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGTERM)
        sigaddset(&stopSignals, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
        signal(SIGTERM, SIG_DFL)
        signal(SIGINT, SIG_DFL)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let server = try await DaemonServer.start(
            DaemonConfiguration(
                socketPath: socket, stateDirectory: URL(fileURLWithPath: stateDirectory, isDirectory: true),
                inheritedSocket: DaemonConfiguration.systemdSocket()))
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: DaemonService(server: server))],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: DaemonServer.logger))
        try await group.run()
    }
}

/// The server as a service: runs until a graceful shutdown, then stops after the requests in flight.
struct DaemonService: Service {
    let server: DaemonServer

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await server.run()
        } onGracefulShutdown: {
            Task { await server.stop() }
            // A stop that does not finish (a request that never ends) must not keep the service alive: systemd
            // would kill it at TimeoutStopSec anyway, without a word.
            Task.detached {
                try? await Task.sleep(for: .seconds(15))
                DaemonServer.logger.error("the graceful stop did not finish in 15 s; exiting")
                exit(1)
            }
        }
    }
}
