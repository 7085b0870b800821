import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A D-Bus "system" bus of a test's own with the real `polkitd` on it: a `dbus-daemon` with a configuration written
/// here, its socket `system_bus_socket` in a directory of its own, and polkitd (root, which the tests run as, is
/// authorized for everything without a rules file; other users follow the machine's rules: Debian's admins are the
/// `sudo` group). Both are this process's children, stopped by ``stop()``. Set-user-ID programs (`pkexec`,
/// `polkit-agent-helper-1`) ignore `DBUS_SYSTEM_BUS_ADDRESS`: a test binds ``socketDirectory`` over `/run/dbus` in a
/// mount namespace of their own. docs/notes/fprintd-private-bus.md describes each step and its pitfalls.
package final class PolkitBus: @unchecked Sendable {
    // Safe to share: every field is set once; the processes are stopped once, under `lock`.
    /// The bus's address, for `DBUS_SYSTEM_BUS_ADDRESS`.
    package let address: String
    /// The directory that holds the bus's socket, under the name the system bus has in `/run/dbus`.
    package let socketDirectory: String
    private let directory: String
    private let processes: [SpawnedProcess]
    private let lock = NSLock()
    private var stopped = false

    /// Whether this machine can run it: polkitd and dbus-daemon installed, and root.
    package static let isAvailable: Bool =
        getuid() == 0
        && ["/usr/lib/polkit-1/polkitd", "/usr/bin/dbus-daemon", "/usr/bin/gdbus"]
            .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

    /// Starts the bus and polkitd, their logs in `directory` (which must exist), and waits until polkitd owns its
    /// name (at most 20 s).
    ///
    /// - Throws: when either does not start.
    package init(directory: String) throws {
        self.directory = directory
        // polkitd drops to its own user and must reach the bus: the socket lives in a directory of its own that
        // every user may pass through (a test's directory is private).
        var template = Array("/tmp/la-bus-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        socketDirectory = String(cString: made)
        chmod(socketDirectory, 0o755)
        let socket = socketDirectory + "/system_bus_socket"
        address = "unix:path=" + socket
        // A strict policy makes the bus refuse its own replies (the client then hangs); polkitd drops to its own
        // user, so every user may connect. Nothing is activated: a missing name fails at once.
        let configuration = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
              </policy>
            </busconfig>
            """
        var started: [SpawnedProcess] = []
        do {
            try Data(configuration.utf8).write(to: URL(fileURLWithPath: directory + "/bus.conf"))
            started.append(
                try SpawnedProcess(
                    "/usr/bin/dbus-daemon", ["--config-file=" + directory + "/bus.conf", "--nofork", "--nosyslog"],
                    log: directory + "/bus.log"))
            try Self.wait(for: socket)
            // With an environment of its own (`env -i`): nothing of the test process's reaches it.
            started.append(
                try SpawnedProcess(
                    "/usr/bin/env", ["-i", "DBUS_SYSTEM_BUS_ADDRESS=" + address, "/usr/lib/polkit-1/polkitd"],
                    log: directory + "/polkitd.log"))
            processes = started
            try waitForOwner(of: "org.freedesktop.PolicyKit1", started: started)
        } catch {
            for process in started.reversed() where process.isRunning { process.stop(SIGKILL) }
            try? FileManager.default.removeItem(atPath: socketDirectory)
            throw error
        }
    }

    deinit { stop() }

    /// Stops polkitd and the bus.
    package func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        for process in processes.reversed() where process.isRunning { process.stop(SIGTERM) }
        try? FileManager.default.removeItem(atPath: socketDirectory)
    }

    /// Whether the bus and polkitd still run.
    package var isRunning: Bool { processes.allSatisfy(\.isRunning) }

    /// The bus's and polkitd's logs, their last `limit` characters each.
    package func logs(limit: Int = 1500) -> String {
        ["bus.log", "polkitd.log"].map { file in
            let text = (try? String(contentsOfFile: directory + "/" + file, encoding: .utf8)) ?? ""
            return "--- \(file):\n" + text.suffix(limit)
        }.joined(separator: "\n")
    }

    /// Waits (at most 20 s) until `name` has an owner on the bus while every process in `started` runs.
    ///
    /// - Throws: when it does not, with the processes' logs.
    package func waitForOwner(of name: String, started: [SpawnedProcess] = []) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, started.allSatisfy(\.isRunning) {
            if try hasOwner(name) { return }
            usleep(20_000)
        }
        throw CocoaError(
            .executableLoad, userInfo: [NSLocalizedDescriptionKey: "nobody took \(name) on the test bus:\n\(logs())"])
    }

    private func hasOwner(_ name: String) throws -> Bool {
        let answer = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/gdbus"),
            [
                "call", "--address", address, "-d", "org.freedesktop.DBus", "-o", "/org/freedesktop/DBus", "-m",
                "org.freedesktop.DBus.NameHasOwner", name,
            ])
        return answer.output.contains("true")
    }

    private static func wait(for socket: String) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if access(socket, F_OK) == 0 { return }
            usleep(10_000)
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "the test bus did not start"])
    }
}
