import Authenticators
import Foundation
import SecurityProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// A verification through fprintd (our fprintd backend) against fprintd's own `fprintd-verify`, on one fprintd of
/// the run's own: Debian's fprintd and polkitd on a private system bus, libfprint's virtual device, one print.
/// Both claim the device, start a verification, take one scan and release; ours adds the attempt policy and our
/// D-Bus client, `fprintd-verify` a process start. Scans are sent once the device listens (it does only while
/// claimed), for `fprintd-verify` once it says it started (it ignores earlier statuses).
enum FprintdBenchmarks {
    static let attempts = 20

    static func run(directory: String) async throws {
        guard
            ["/usr/libexec/fprintd", "/usr/lib/polkit-1/polkitd", "/usr/bin/fprintd-verify"]
                .allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }), getuid() == 0
        else {
            print(
                "fingerprint verify through fprintd: not measured: needs root, fprintd and polkitd (scripts/bootstrap)")
            return
        }
        var template = Array("/tmp/la-bus-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw AuthenticatorBenchmarks.BenchFailure("mkdtemp failed") }
        let bus = String(cString: made)
        chmod(bus, 0o755)
        defer { try? FileManager.default.removeItem(atPath: bus) }
        let address = "unix:path=\(bus)/bus.sock"
        let reader = directory + "/fprintd-reader.sock"
        let prints = directory + "/fprintd-prints"
        try Data(
            """
            <busconfig><type>system</type><listen>\(address)</listen><auth>EXTERNAL</auth>
            <policy context="default"><allow user="*"/><allow own="*"/>
            <allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/></policy></busconfig>
            """.utf8
        ).write(to: URL(fileURLWithPath: bus + "/bus.conf"))
        var pids: [pid_t] = []
        defer { for pid in pids.reversed() { Measure.stop(pid) } }
        pids.append(try spawn("/usr/bin/dbus-daemon", ["--config-file=\(bus)/bus.conf", "--nofork", "--nosyslog"]))
        while access(bus + "/bus.sock", F_OK) != 0 { usleep(10_000) }
        pids.append(
            try spawn("/usr/bin/env", ["-i", "DBUS_SYSTEM_BUS_ADDRESS=" + address, "/usr/lib/polkit-1/polkitd"]))
        pids.append(
            try spawn(
                "/usr/bin/env",
                [
                    "-i", "DBUS_SYSTEM_BUS_ADDRESS=" + address, "FP_VIRTUAL_DEVICE=" + reader,
                    "FP_DRIVERS_WHITELIST=virtual_device", "STATE_DIRECTORY=" + prints, "/usr/libexec/fprintd", "-t",
                ]))
        let authenticator = try BiometricAuthenticator(
            configuration: .init(
                stateDirectory: directory + "/fprintd-state", username: "root",
                backend: .fprintd(address: address, printDirectory: prints)))
        // Up once both names answer: the device's description comes through polkit-free calls, the claim needs polkitd.
        var up = false
        for _ in 0..<500 where !up {
            up = (try? await authenticator.open()) != nil
            if !up { usleep(20_000) }
        }
        guard up else { throw AuthenticatorBenchmarks.BenchFailure("fprintd did not come up") }
        async let enrolled = authenticator.enroll(finger: .rightIndex)
        try await AuthenticatorBenchmarks.feed(reader, Array(repeating: "SCAN bench", count: 5))
        _ = try await enrolled

        var start = ContinuousClock.now
        for _ in 0..<attempts {
            async let matched = authenticator.verify()
            try await AuthenticatorBenchmarks.feed(reader, ["SCAN bench"])
            _ = try await matched
        }
        let ours = Double(attempts) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)

        start = ContinuousClock.now
        for index in 0..<attempts {
            let log = directory + "/fprintd-verify-\(index).log"
            let pid = try spawn(
                "/usr/bin/env", ["DBUS_SYSTEM_BUS_ADDRESS=" + address, "/usr/bin/fprintd-verify", "root"], log: log)
            while !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("Verify started") {
                usleep(1_000)
            }
            try await AuthenticatorBenchmarks.feed(reader, ["SCAN bench"])
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            guard status == 0 else { throw AuthenticatorBenchmarks.BenchFailure("fprintd-verify did not match") }
        }
        let baseline = Double(attempts) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)
        AuthenticatorBenchmarks.report(
            "fingerprint verify through fprintd (virtual device)", ours: ours, baseline: baseline,
            baselineName: "fprintd-verify")
    }

    /// Starts `path arguments` with its output in `log` (or discarded); its pid.
    static func spawn(_ path: String, _ arguments: [String], log: String = "/dev/null") throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        guard Measure.spawn(&pid, path, arguments, actions: &actions) == 0 else {
            throw AuthenticatorBenchmarks.BenchFailure("\(path) did not start")
        }
        return pid
    }
}
