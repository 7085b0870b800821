import Foundation
import Glibc

/// Timing helpers shared by every benchmark section.
enum Measure {
    /// Runs `body` repeatedly for about `seconds` of this thread's user CPU time (after a short warm-up) and returns
    /// operations per CPU second.
    ///
    /// CPU time, not wall time, is what `openssl speed` divides by (its default without `-elapsed`), so both sides
    /// are measured alike, and load from other processes on a shared machine does not skew the ratio.
    static func opsPerSecond(seconds: Double = 2, _ body: () throws -> Void) rethrows -> Double {
        for _ in 0..<50 { try body() }
        let start = threadUserTime()
        var iterations = 0
        var elapsed = 0.0
        repeat {
            for _ in 0..<20 { try body() }
            iterations += 20
            elapsed = threadUserTime() - start
        } while elapsed < seconds
        return Double(iterations) / elapsed
    }

    /// Runs `body` for about `seconds` of wall-clock time (after `warmUp` calls) and returns operations per second.
    /// For work done by another process or device (a TPM, a tool run per operation), which the calling thread's CPU
    /// time does not see; noisier on a shared machine, so callers keep the best of several rounds.
    static func opsPerWallSecond(seconds: Double = 1, warmUp: Int = 3, _ body: () throws -> Void) rethrows -> Double {
        for _ in 0..<warmUp { try body() }
        let start = Date()
        var iterations = 0
        repeat {
            try body()
            iterations += 1
        } while Date().timeIntervalSince(start) < seconds
        return Double(iterations) / Date().timeIntervalSince(start)
    }

    /// CPU seconds consumed by the calling thread (user and system; crypto loops make no system calls).
    static func threadUserTime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Prints one comparison line: ours, the baseline, and ours / baseline.
    static func report(_ name: String, ours: Double, baseline: Double, baselineName: String, target: String? = nil) {
        let ratio = baseline > 0 ? ours / baseline : .nan
        var line =
            "\(name): ours \(format(ours)) ops/s, \(baselineName) \(format(baseline)) ops/s, ratio \(String(format: "%.2f", ratio))"
        if let target { line += " (target \(target))" }
        print(line)
    }

    static func format(_ value: Double) -> String {
        String(format: value >= 100 ? "%.0f" : "%.2f", value)
    }

    /// Runs a command and returns its standard output, or nil when it cannot run or fails.
    ///
    /// Spawned with an empty signal mask and default signal actions: threads of the Swift runtime block signals,
    /// a child inherits that mask, and `openssl speed` times itself with SIGALRM (blocked, it would never stop).
    static func run(_ executable: String, _ arguments: [String]) -> String? {
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        var pid: pid_t = 0
        let spawned = spawn(&pid, executable, arguments, actions: &actions)
        close(pipe[1])
        defer { close(pipe[0]) }
        guard spawned == 0 else { return nil }
        let output = FileHandle(fileDescriptor: pipe[0], closeOnDealloc: false).readDataToEndOfFile()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { return nil }
        return String(decoding: output, as: UTF8.self)
    }

    /// `posix_spawn` of `executable arguments` with `actions`, an empty signal mask and default signal actions.
    static func spawn(
        _ pid: inout pid_t, _ executable: String, _ arguments: [String], actions: inout posix_spawn_file_actions_t
    ) -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        return posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
    }

    /// Stops a child started with `spawn` (SIGTERM) and reaps it.
    /// Starts a copy of this la-bench, made in `directory`, as `uid` (`setpriv`, no groups) with `arguments`, its
    /// standard output into `log` and its errors nowhere: the other user of the sections that need one. Its pid,
    /// or nil when it could not be started.
    static func spawnCopy(asUser uid: uid_t, in directory: URL, _ arguments: [String], log: String) throws -> pid_t? {
        let copy = directory.appendingPathComponent("la-bench-\(uid)").path
        try FileManager.default.copyItem(atPath: CommandLine.arguments[0], toPath: copy)
        chmod(copy, 0o755)
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let command = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", copy] + arguments
        return spawn(&pid, "/usr/bin/setpriv", command, actions: &actions) == 0 ? pid : nil
    }

    /// What the file at `log` (a child's report) holds once it contains `text`, waiting up to 30 s; `found` says
    /// whether it came.
    static func report(in log: String, containing text: String) -> (found: Bool, text: String) {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let report = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if report.contains(text) || ContinuousClock.now >= deadline { return (report.contains(text), report) }
            usleep(50_000)
        }
    }

    static func stop(_ pid: pid_t) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// Starts a fresh swtpm on a state directory of its own (made here) and waits for its socket.
    ///
    /// - Returns: its pid (for `stop`) and TCTI, or nil when it did not start.
    static func startSoftwareTPM(in state: String) -> (pid: pid_t, tcti: String)? {
        guard (try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)) != nil else {
            return nil
        }
        let socket = state + "/sock"
        // In the foreground, output to /dev/null (a daemonized swtpm would keep a captured stdout open).
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        guard
            spawn(
                &pid, "/usr/bin/swtpm",
                [
                    "socket", "--tpm2", "--tpmstate", "dir=\(state)", "--server", "type=unixio,path=\(socket)",
                    "--ctrl", "type=unixio,path=\(socket).ctrl", "--flags", "not-need-init,startup-clear",
                ], actions: &actions) == 0
        else { return nil }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
        return (pid, "swtpm:path=\(socket)")
    }

    /// pam_matrix's module as Debian installs it (libpam-wrapper).
    static let pamMatrix = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"

    /// Writes PAM service `la-bench` (user `bench`, passcode `secret`) for pam_matrix under `directory/pam`;
    /// its configuration directory, or nil when pam_matrix is not installed.
    static func writeBenchPAM(in directory: String) throws -> String? {
        guard FileManager.default.fileExists(atPath: pamMatrix) else { return nil }
        let confdir = directory + "/pam"
        try FileManager.default.createDirectory(atPath: confdir, withIntermediateDirectories: true)
        try "bench:secret:la-bench\n".write(toFile: confdir + "/passdb", atomically: true, encoding: .utf8)
        try
            "auth required \(pamMatrix) passdb=\(confdir)/passdb\naccount required \(pamMatrix) passdb=\(confdir)/passdb\n"
            .write(toFile: confdir + "/la-bench", atomically: true, encoding: .utf8)
        return confdir
    }
}
