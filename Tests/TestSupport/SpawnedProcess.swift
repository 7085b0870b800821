import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn` and reaped with `waitpid`: no Foundation `Process`, whose exit
/// monitoring depends on Dispatch's global queues and can miss an exit while tests keep those queues busy. The child
/// starts with an empty signal mask and default signal actions, whatever the spawning thread had, and with no
/// descriptor of this process but the three standard ones.
package final class SpawnedProcess: @unchecked Sendable {
    // Safe to share: `exit` is only touched under `lock`.
    package let pid: pid_t
    private let lock = NSLock()
    private var exit: (status: Int32, bySignal: Bool)?

    /// Starts `executable arguments` with this process's environment merged with `environment`, standard output and
    /// error appended to `log` (or discarded), standard input read from `input` (a file or FIFO; else inherited).
    /// With `terminal` (a terminal device), the child runs in a session of its own with that terminal as its
    /// controlling terminal and its standard input, output and error; `newSession` alone starts it in a session of
    /// its own (no controlling terminal).
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], log: String? = nil,
        input: String? = nil, terminal: String? = nil, newSession: Bool = false
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Only standard input, output and error pass to the child. A descriptor of this process without close-on-exec
        // (the pipe of a `runCapturingOutput` that another test runs at the same moment) would otherwise stay open
        // in the child, and that reader would wait for its end of file as long as the child lives.
        _ = addCloseFrom?(&actions, 3)
        if let terminal {
            // Opened after setsid (POSIX_SPAWN_SETSID acts before the file actions) and without O_NOCTTY: the
            // session's controlling terminal.
            posix_spawn_file_actions_addopen(&actions, 0, terminal, O_RDWR, 0)
            posix_spawn_file_actions_adddup2(&actions, 0, 1)
            posix_spawn_file_actions_adddup2(&actions, 0, 2)
        } else {
            if let input { posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0) }
            let output = log ?? "/dev/null"
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        let session: Int32 = terminal != nil || newSession ? 0x80 : 0  // POSIX_SPAWN_SETSID
        posix_spawnattr_setflags(&attributes, Int16(Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) | session))
        let merged = inheritedEnvironment(merging: environment)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard status == 0 else {
            throw CocoaError(
                .executableLoad, userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(executable): \(status)"])
        }
        pid = child
    }

    deinit {
        if isRunning {
            send(SIGKILL)
            _ = wait(timeout: 10)
        }
    }

    /// Sends `signal` unless the child was reaped: its pid may belong to another process by then (pids wrap at 32768
    /// here, within a test run). Under the lock, so no reaping comes between the check and the signal.
    private func send(_ signal: Int32) {
        lock.withLock {
            if exit == nil { _ = kill(pid, signal) }
        }
    }

    /// Whether the child has not exited yet (reaping it if it has).
    package var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        if exit != nil { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        exit = Self.decode(status)
        return false
    }

    /// Waits up to `timeout` seconds for the exit; nil if the child still runs.
    package func wait(timeout: Double) -> (status: Int32, bySignal: Bool)? {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning, Date() < deadline { usleep(10_000) }
        return lock.withLock { exit }
    }

    /// Sends `signal`, waits up to 30 s, then SIGKILL; how the child ended.
    @discardableResult
    package func stop(_ signal: Int32 = SIGTERM) -> (status: Int32, bySignal: Bool) {
        send(signal)
        if let ended = wait(timeout: 30) { return ended }
        send(SIGKILL)
        return wait(timeout: 30) ?? (SIGKILL, true)
    }

    private static func decode(_ status: Int32) -> (status: Int32, bySignal: Bool) {
        let signal = status & 0x7F
        return signal == 0 ? ((status >> 8) & 0xFF, false) : (signal, true)
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which its Swift module does not export.
private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
    unsafeBitCast($0, to: AddCloseFrom.self)
}
