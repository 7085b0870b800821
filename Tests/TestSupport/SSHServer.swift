import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's `sshd` on a loopback port of its own for one test: `directory/sshd_config` (the port, a host key made
/// here, a pid file, then the test's settings), run in the foreground (`-D -e`, its log in `directory/sshd.log`)
/// until ``stop()``.
package final class SSHServer {
    package let port: Int
    package let log: String
    private let sshd: SpawnedProcess

    package static var isAvailable: Bool {
        getuid() == 0
            && ["/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: $0)
            }
    }

    /// Starts sshd and waits (at most 20 s) until it accepts connections. `launcher`: the program and arguments
    /// that run `sshd -D -e -f directory/sshd_config` in the test's way (a mount namespace of its own); by default
    /// sshd itself.
    ///
    /// - Throws: when the host key cannot be made or sshd does not listen.
    package init(directory: String, settings: String, launcher: [String]? = nil) throws {
        log = directory + "/sshd.log"
        let keygen = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/ssh-keygen"),
            ["-q", "-t", "ed25519", "-N", "", "-f", directory + "/host_key"])
        guard keygen.status == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "ssh-keygen: \(keygen.output)"])
        }
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        // Another test's sshd may draw the same free port and bind it first: this sshd then exits ("Bind to port …
        // failed") and a new port is drawn. Up when this sshd still runs, accepts a probe and says it listens.
        var attempt = 0
        while true {
            attempt += 1
            let port = try Self.freeLoopbackPort()
            try """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(directory)/host_key
            PidFile \(directory)/sshd.pid
            \(settings)

            """.write(toFile: directory + "/sshd_config", atomically: true, encoding: .utf8)
            // Not through Foundation's Process: sshd closes every inherited descriptor at start, which Foundation
            // takes for its exit and then waits for it for good, holding up every other Process of the test.
            let command = launcher ?? ["/usr/sbin/sshd", "-D", "-e", "-f", directory + "/sshd_config"]
            let sshd = try SpawnedProcess(command[0], Array(command.dropFirst()), log: log, input: "/dev/null")
            // One probe at a time until sshd answers: a probe is a connection sshd counts against MaxStartups.
            for _ in 0..<400 {
                guard sshd.isRunning else { break }
                let listening =
                    (try? String(contentsOfFile: log, encoding: .utf8))?
                    .contains("Server listening on 127.0.0.1 port \(port).") ?? false
                if listening && Self.connectable(port) {
                    self.port = port
                    self.sshd = sshd
                    return
                }
                usleep(50_000)
            }
            let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if sshd.isRunning { sshd.stop() }
            guard attempt < 5, said.contains("Bind to port \(port)") else {
                throw CocoaError(
                    .executableLoad, userInfo: [NSLocalizedDescriptionKey: "sshd is not listening: \(said)"])
            }
        }
    }

    /// What sshd logged so far.
    package var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Stops sshd and reaps it (a server released still running is killed).
    package func stop() {
        if sshd.isRunning { sshd.stop() }
    }

    /// A loopback port nobody listens on, outside the kernel's ephemeral range (32768–60999), so no other test's
    /// `bind(0)` can be handed it between this check and sshd's own bind.
    private static func freeLoopbackPort() throws -> Int {
        for _ in 0..<50 {
            let port = Int.random(in: 20_000..<30_000)
            if withLoopbackSocket(port, { bind($0, $1, $2) == 0 }) { return port }
        }
        throw CocoaError(.fileWriteUnknown)
    }

    private static func connectable(_ port: Int) -> Bool {
        withLoopbackSocket(port) { connect($0, $1, $2) == 0 }
    }

    /// Runs `body` with a new TCP socket and the address 127.0.0.1:`port`; the socket is closed afterwards.
    private static func withLoopbackSocket(
        _ port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
