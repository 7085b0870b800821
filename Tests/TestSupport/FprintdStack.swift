import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real fprintd for a test, as a desktop runs it but on a bus of the test's own: a `dbus-daemon` with a
/// configuration written here (a "system" bus on a socket in `directory`), the real `polkitd` on it (root, which the
/// test runs as, is authorized for everything without a rules file), and Debian's `/usr/libexec/fprintd` driving
/// libfprint's virtual device, its prints under `directory/prints` (`STATE_DIRECTORY`). All three are this process's
/// children, stopped by ``stop()``. The device is libfprint's plain `virtual_device`, which cannot identify: fprintd
/// then verifies the first enrolled finger only. (`virtual_device_storage` identifies, but fprintd 1.94.2 left the
/// bus in the middle of some enrollments on it.) docs/notes/fprintd-private-bus.md describes each step and its
/// pitfalls.
package final class FprintdStack: @unchecked Sendable {
    // Safe to share: every field is set once; the processes are stopped once, under `lock`.
    /// The bus's address, for `LA_FPRINTD_BUS` and `DBUS_SYSTEM_BUS_ADDRESS`.
    package let address: String
    /// fprintd's print store (its `STATE_DIRECTORY`), for `LA_FPRINTD_PRINTS`.
    package let prints: String
    /// The virtual device's socket: scans go here, and it listens only while the device is claimed.
    package let readerSocket: String
    package let directory: String
    private let busDirectory: String
    private let processes: [SpawnedProcess]
    private let lock = NSLock()
    private var stopped = false

    /// Whether this machine can run the stack: fprintd, polkitd and dbus-daemon installed, and root (polkitd
    /// authorizes root only, without a rules file in the real /etc).
    package static let isAvailable: Bool =
        getuid() == 0
        && ["/usr/libexec/fprintd", "/usr/lib/polkit-1/polkitd", "/usr/bin/dbus-daemon", "/usr/bin/fprintd-enroll"]
            .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

    /// Starts the bus, polkitd and fprintd in `directory` (created) and waits until both names are on the bus (at
    /// most 20 s).
    ///
    /// - Throws: when a part does not start.
    package init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory + "/prints", withIntermediateDirectories: true)
        // polkitd drops to its own user and must reach the bus: the socket lives in a directory of its own that
        // every user may pass through (a test's directory is private).
        var template = Array("/tmp/la-bus-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        busDirectory = String(cString: made)
        chmod(busDirectory, 0o755)
        let socket = busDirectory + "/bus.sock"
        address = "unix:path=" + socket
        prints = directory + "/prints"
        readerSocket = directory + "/reader.sock"
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
        try Data(configuration.utf8).write(to: URL(fileURLWithPath: directory + "/bus.conf"))
        var started: [SpawnedProcess] = []
        do {
            started.append(
                try SpawnedProcess(
                    "/usr/bin/dbus-daemon", ["--config-file=" + directory + "/bus.conf", "--nofork", "--nosyslog"],
                    log: directory + "/bus.log"))
            try Self.wait(for: socket)
            // Both with an environment of their own (`env -i`): nothing of the test process's reaches them.
            started.append(
                try SpawnedProcess(
                    "/usr/bin/env", ["-i", "DBUS_SYSTEM_BUS_ADDRESS=" + address, "/usr/lib/polkit-1/polkitd"],
                    log: directory + "/polkitd.log"))
            started.append(
                try SpawnedProcess(
                    "/usr/bin/env",
                    [
                        "-i", "DBUS_SYSTEM_BUS_ADDRESS=" + address, "FP_VIRTUAL_DEVICE=" + readerSocket,
                        "FP_DRIVERS_WHITELIST=virtual_device", "STATE_DIRECTORY=" + prints, "G_MESSAGES_DEBUG=all",
                        "/usr/libexec/fprintd", "-t",
                    ], log: directory + "/fprintd.log"))
            processes = started
            try waitForNames()
        } catch {
            for process in started.reversed() where process.isRunning { process.stop(SIGKILL) }
            try? FileManager.default.removeItem(atPath: busDirectory)
            throw error
        }
    }

    deinit { stop() }

    /// Stops fprintd, polkitd and the bus.
    package func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        for process in processes.reversed() where process.isRunning { process.stop(SIGTERM) }
        try? FileManager.default.removeItem(atPath: busDirectory)
    }

    /// The environment a process needs to reach this fprintd as its system bus.
    package var environment: [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": address, "LA_FPRINTD_BUS": address, "LA_FPRINTD_PRINTS": prints]
    }

    /// fprintd's log so far.
    package var log: String { (try? String(contentsOfFile: directory + "/fprintd.log", encoding: .utf8)) ?? "" }

    /// Sends one virtual-device command (`SCAN <id>`, `RETRY 2`…) once the device listens (it does only while
    /// claimed), retrying for up to `timeout` seconds; true when it was delivered.
    @discardableResult
    package func send(_ command: String, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if Self.deliver(command, to: readerSocket) { return true }
            usleep(20_000)
        }
        return false
    }

    /// Runs `fprintd-enroll -f <finger> <user>` against this fprintd while sending `scans` scans of `id`.
    ///
    /// - Returns: the tool's exit status and output.
    package func enroll(
        finger: String, user: String = "root", id: String, scans: Int = 5
    ) throws -> (status: Int32, output: String) {
        let log = directory + "/enroll-\(UUID().uuidString).log"
        let tool = try SpawnedProcess(
            "/usr/bin/fprintd-enroll", ["-f", finger, user], environment: ["DBUS_SYSTEM_BUS_ADDRESS": address],
            log: log)
        for _ in 0..<scans where tool.isRunning { send("SCAN \(id)") }
        let exit = tool.wait(timeout: 30) ?? tool.stop(SIGKILL)
        return (exit.status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    /// Runs `fprintd-verify <user>` against this fprintd, sending a scan of `id` once it says it started (it drops
    /// statuses that come before its VerifyStart answer).
    package func verifyWithTool(user: String = "root", id: String) throws -> (status: Int32, output: String) {
        let log = directory + "/verify-\(UUID().uuidString).log"
        let tool = try SpawnedProcess(
            "/usr/bin/fprintd-verify", [user], environment: ["DBUS_SYSTEM_BUS_ADDRESS": address], log: log)
        let deadline = Date().addingTimeInterval(20)
        var started = false
        while Date() < deadline, tool.isRunning {
            started = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("Verify started")
            if started { break }
            usleep(10_000)
        }
        // Only a verification that started gets the finger: a scan sent after the tool gave up (the reader was
        // claimed) would wait in the virtual reader for whoever verifies next.
        if started { send("SCAN \(id)") }
        let exit = tool.wait(timeout: 30) ?? tool.stop(SIGKILL)
        return (exit.status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    private func waitForNames() throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let names = ["org.freedesktop.PolicyKit1", "net.reactivated.Fprint"]
            if try names.allSatisfy({ try hasOwner($0) }) { return }
            guard processes.allSatisfy(\.isRunning) else { break }
            usleep(20_000)
        }
        let names = ["dbus-daemon", "polkitd", "fprintd"]
        let ended = zip(names, processes).filter { !$0.1.isRunning }.map(\.0)
        var logs = ""
        for file in ["bus.log", "polkitd.log", "fprintd.log"] {
            let text = (try? String(contentsOfFile: directory + "/" + file, encoding: .utf8)) ?? ""
            logs += "\n--- \(file):\n" + text.suffix(1500)
        }
        throw CocoaError(
            .executableLoad,
            userInfo: [NSLocalizedDescriptionKey: "fprintd did not come up (ended: \(ended)):\(logs)"])
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

    /// One command on a fresh connection to the virtual device (no trailing newline; the device answers and
    /// closes: linux-backends.md §1.3).
    private static func deliver(_ command: String, to path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return false }
        let bytes = Array(command.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else { return false }
        shutdown(fd, Int32(SHUT_WR))
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(fd, &buffer, buffer.count) > 0 {}
        return true
    }
}
