import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real fprintd for a test, as a desktop runs it but on a bus of the test's own (``PolkitBus``: a "system" bus with
/// the real `polkitd`, which authorizes root, the test's user, for everything), Debian's `/usr/libexec/fprintd`
/// driving libfprint's virtual device, its prints under `directory/prints` (`STATE_DIRECTORY`). All are this
/// process's children, stopped by ``stop()``. The device is libfprint's plain `virtual_device`, which cannot
/// identify: fprintd then verifies the first enrolled finger only. (`virtual_device_storage` identifies, but fprintd
/// 1.94.2 left the bus in the middle of some enrollments on it.) docs/notes/fprintd-private-bus.md describes each
/// step and its pitfalls.
package final class FprintdStack: @unchecked Sendable {
    // Safe to share: every field is set once; the processes are stopped once, under `lock`.
    /// The bus's address, for `LA_FPRINTD_BUS` and `DBUS_SYSTEM_BUS_ADDRESS`.
    package var address: String { bus.address }
    /// fprintd's print store (its `STATE_DIRECTORY`), for `LA_FPRINTD_PRINTS`.
    package let prints: String
    /// The virtual device's socket: scans go here, and it listens only while the device is claimed.
    package let readerSocket: String
    package let directory: String
    private let bus: PolkitBus
    private let fprintd: SpawnedProcess
    private let lock = NSLock()
    private var stopped = false

    /// Whether this machine can run the stack: fprintd, polkitd and dbus-daemon installed, and root (polkitd
    /// authorizes root only, without a rules file in the real /etc).
    package static let isAvailable: Bool =
        PolkitBus.isAvailable
        && ["/usr/libexec/fprintd", "/usr/bin/fprintd-enroll"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }

    /// Starts the bus, polkitd and fprintd in `directory` (created) and waits until both names are on the bus (at
    /// most 20 s each).
    ///
    /// - Throws: when a part does not start.
    package init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory + "/prints", withIntermediateDirectories: true)
        prints = directory + "/prints"
        readerSocket = directory + "/reader.sock"
        bus = try PolkitBus(directory: directory)
        do {
            // With an environment of its own (`env -i`): nothing of the test process's reaches it.
            fprintd = try SpawnedProcess(
                "/usr/bin/env",
                [
                    "-i", "DBUS_SYSTEM_BUS_ADDRESS=" + bus.address, "FP_VIRTUAL_DEVICE=" + readerSocket,
                    "FP_DRIVERS_WHITELIST=virtual_device", "STATE_DIRECTORY=" + prints, "G_MESSAGES_DEBUG=all",
                    "/usr/libexec/fprintd", "-t",
                ], log: directory + "/fprintd.log")
        } catch {
            bus.stop()
            throw error
        }
        do {
            try bus.waitForOwner(of: "net.reactivated.Fprint", started: [fprintd])
        } catch {
            if fprintd.isRunning { fprintd.stop(SIGKILL) }
            bus.stop()
            let log = (try? String(contentsOfFile: directory + "/fprintd.log", encoding: .utf8)) ?? ""
            let why = "fprintd did not come up: \(error)\n--- fprintd.log:\n\(log.suffix(1500))"
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: why])
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
        if fprintd.isRunning { fprintd.stop(SIGTERM) }
        bus.stop()
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
