import ArgumentParser
import Foundation
import Logging
import SecurityDaemon
import SecurityProtocol
import ServiceLifecycle
import Synchronization
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

/// `localauthd`: the engine in its own process. It owns every user's store, keys, attempt counters and the reader,
/// serves the message protocol on a Unix socket (brief requests also on the lane beside it), and tells callers apart
/// by the kernel's peer credentials.
@main
struct LocalAuthDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "localauthd",
        abstract: "Serves LocalAuthentication and Keychain Services to the programs of every user of this machine.",
        discussion: """
            One store per user under the state directory (<dir>/<uid>), opened on first use. PAM, readers and
            timeouts come from the environment as for the embedded client (LA_PAM_SERVICE, LA_PAM_CONFDIR,
            LA_READER_DRIVERS). The app registry is <config-directory>/apps.d (one file per app; see
            docs/APP-REGISTRY.md), read again when it changes and on SIGHUP. SIGTERM stops it gracefully: requests
            in flight finish first.
            """)

    @Option(help: "The listening socket.") var socket = "/run/localauthd/socket"
    @Option(help: "Where each user's store lives (<dir>/<uid>).") var stateDirectory = "/var/lib/localauthd"
    @Option(help: "Configuration directory; the app registry is its apps.d.") var configDirectory = "/etc/localauthd"
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let server = try await DaemonServer.start(
            DaemonConfiguration(
                socketPath: socket, stateDirectory: URL(fileURLWithPath: stateDirectory, isDirectory: true),
                inheritedSocket: DaemonConfiguration.systemdSocket(),
                configurationDirectory: URL(fileURLWithPath: configDirectory, isDirectory: true)))
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: DaemonService(server: server))], gracefulShutdownSignals: [],
                logger: DaemonServer.logger))
        StopSignals.install(reload: { server.reloadRegistry() }) { Task { await group.triggerGracefulShutdown() } }
        try await group.run()
    }
}

/// SIGTERM and SIGINT start the graceful stop, and SIGHUP reads the app registry again, through a handler of our
/// own: it writes a byte (the signal's number) to a pipe that a thread of our own reads. (Dispatch's signal sources on Linux deliver a signal only while every thread blocks it,
/// which a daemon started from an arbitrary thread cannot promise; a handler works on whichever thread the kernel
/// picks.) If the stop has not ended the process 15 s later, it exits: systemd would kill it anyway.
enum StopSignals {
    nonisolated(unsafe) static var pipeWrite: Int32 = -1

    static func install(reload: @escaping @Sendable () -> Void, stop: @escaping @Sendable () -> Void) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { fatalError("localauthd: no pipe for signals") }
        pipeWrite = fds[1]
        let read = fds[0]
        let thread = Thread {
            nameCurrentThread("localauthd.sig")
            var byte: UInt8 = 0
            while true {
                let count = Glibc.read(read, &byte, 1)
                if count < 0 && errno == EINTR { continue }
                guard count == 1, byte == UInt8(SIGHUP) else { break }
                DaemonServer.logger.info("SIGHUP: reading the app registry again")
                reload()
            }
            DaemonServer.logger.info("stopping: requests in flight finish first")
            stop()
            Thread.sleep(forTimeInterval: 15)
            DaemonServer.logger.error("the graceful stop did not finish in 15 s; exiting")
            exit(1)
        }
        thread.start()
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = Glibc.write(StopSignals.pipeWrite, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            sigaction(signal, &action, nil)
            sigaddset(&unblock, signal)
        }
        // At least this thread takes them, whatever mask the starting program passed down.
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }
}

/// The server as a service: runs until a graceful shutdown, then stops after the requests in flight.
struct DaemonService: Service {
    let server: DaemonServer

    func run() async throws {
        let stop = StopInProgress()
        try await withGracefulShutdownHandler {
            try await server.run()
        } onGracefulShutdown: {
            stop.task.withLock { $0 = Task { await server.stop() } }
        }
        // The stop closes the listener first, which ends `run()`; it then lets requests in flight finish and shuts
        // the threads down. The process must not exit (and run its libraries' exit handlers) under it.
        await stop.task.withLock { $0 }?.value
    }
}

/// The graceful stop, once it began.
private final class StopInProgress: Sendable {
    let task = Mutex<Task<Void, Never>?>(nil)
}
