import CSocket
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Which process exec'd which registered executable, recorded as each exec happens: what `/proc/<pid>/exe` cannot
/// tell, since a program may set it afterwards (`prctl(PR_SET_MM, PR_SET_MM_MAP)` from a user namespace of its own)
/// to name a file it never exec'd.
///
/// How a record is taken, and why each step:
/// - **fanotify's exec permission event** on each watched file (an inode mark, `FAN_OPEN_EXEC_PERM`): the kernel
///   holds the exec'ing thread until localauthd answers, and says which thread it is.
/// - **A ptrace stop before the answer** (`PTRACE_SEIZE` with `PTRACE_O_TRACEEXEC`, then `PTRACE_INTERRUPT`): the
///   permission comes before the exec can still fail (a bad argument vector, say), and a program that lets its exec
///   of the app fail on purpose runs on as itself. Seized before the answer, the thread stops at the end of a
///   successful exec (`PTRACE_EVENT_EXEC`), before the new program's first instruction, in a memory map that is new
///   and no one else's; a failed exec stops it instead as it returns to its old program. Only the first stop is a
///   record, and only when `/proc/<pid>/exe` then names the watched file. Then localauthd lets it go.
/// - **The kernel's process events** (``ProcessEvents``' netlink subscription, a queue of its own, read by this
///   record's thread as events arrive and before each verdict): a recorded process that execs anything else, or
///   exits, loses its record. When the queue overflowed, every record is dropped (each of those programs must
///   start again to regain its registration): an attacker who floods it gets nothing.
///
/// A process that already ran a watched file when localauthd began watching it (the daemon's start, or a
/// registration added later) is recorded as ``Verdict/runningWhenWatched``: nothing saw its exec, so it is judged by
/// ``ProgramIntegrity`` alone, as before this record existed. A watched file replaced by another one at its path (a
/// package upgrade renames a new file over it) is watched again as inotify reports the change.
///
/// One thread holds every trace (ptrace binds a tracee to the thread that attached), and never blocks while a
/// tracee is pending. Needs `CAP_SYS_ADMIN` (fanotify's permission events), `CAP_SYS_PTRACE` and `CAP_NET_ADMIN`
/// (process events): localauthd as root. Two records on one machine that watch the same file contend: a thread
/// has only one tracer, so the second record cannot see that exec and has no record of it.
package final class ExecRecord: Sendable {
    /// What the record says of a process and a file.
    package enum Verdict: Sendable, Equatable {
        /// The process finished an exec of the file while it was watched, and exec'd nothing since.
        case executed
        /// The process ran the file when localauthd began watching it: no exec of it was seen.
        case runningWhenWatched
        /// No exec of the file by this process was seen: it runs something else, or `/proc/<pid>/exe` names a file
        /// it never exec'd.
        case notSeen
    }

    /// Why there is no exec record on this machine.
    package struct Unavailable: Error, CustomStringConvertible {
        package var description: String
    }

    /// A file, by device and inode.
    struct FileKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    private struct Record {
        var file: FileKey
        /// Whether the kernel's event for the recorded exec is still to come (it follows the ptrace stop).
        var ownExecPending: Bool
        var whenWatched: Bool
    }

    private struct State {
        var records: [Int32: Record] = [:]
        /// The files watched now, and the paths they were found at (by directory, for inotify).
        var watched: Set<FileKey> = []
        var paths: [String: Set<String>] = [:]
        /// The paths whose running processes were recorded as running when watched (once each).
        var scannedPaths: Set<String> = []
        var directories: [Int32: String] = [:]
        /// The latest exec event, in CLOCK_MONOTONIC nanoseconds, of each process with a trace pending.
        var execs: [Int32: UInt64] = [:]
        var awaited: Set<Int32> = []
    }

    private let group: Int32
    private let processEvents: Int32
    private let changes: Int32
    private let state = Mutex(State())
    private let report: @Sendable (String) -> Void

    /// Starts recording, with `report` told of what an administrator should know (events lost, a trace refused).
    ///
    /// - Throws: ``Unavailable`` naming what the kernel refused.
    package init(report: @escaping @Sendable (String) -> Void) throws(Unavailable) {
        self.report = report
        if let missing = Self.missingPrivilege() { throw Unavailable(description: missing) }
        let group = la_exec_record_open()
        guard group >= 0 else {
            throw Unavailable(
                description: "fanotify's permission events are refused (\(String(cString: strerror(errno))))")
        }
        let processEvents = la_proc_events_open(1 << 21)
        guard processEvents >= 0, la_proc_events_work(processEvents, 1_000) == 1 else {
            close(group)
            if processEvents >= 0 { close(processEvents) }
            throw Unavailable(description: "the kernel's process events do not reach localauthd")
        }
        // Comm events only served the test above: any program can send them fast enough to overflow the queue,
        // which voids every record.
        guard la_proc_events_ignore_comm(processEvents) == 0 else {
            close(group)
            close(processEvents)
            throw Unavailable(description: "the process events' filter cannot be set")
        }
        let changes = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard changes >= 0 else {
            close(group)
            close(processEvents)
            throw Unavailable(description: "inotify is refused (\(String(cString: strerror(errno))))")
        }
        self.group = group
        self.processEvents = processEvents
        self.changes = changes
        let thread = Thread { [self] in run() }
        thread.name = "exec record"
        thread.start()
    }

    /// Watches the files `paths` name now (absolute paths; others are left out), and records as
    /// ``Verdict/runningWhenWatched`` the processes that run one of them already. Returns the problems, one line
    /// per path that cannot be watched.
    @discardableResult
    package func watch(_ paths: [String]) -> [String] {
        var problems: [String] = []
        for path in paths where path.hasPrefix("/") {
            if let problem = watch(path, scanning: true) { problems.append(problem) }
        }
        return problems
    }

    /// Marks the file at `path` (again: a file put in place of a watched one, even one with the old one's inode
    /// number, is marked too); when `scanning` and its device and inode were not watched before, records the
    /// processes that already run it.
    private func watch(_ path: String, scanning: Bool) -> String? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let file = FileKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        let directory = (path as NSString).deletingLastPathComponent
        return state.withLock { state -> String? in
            if state.paths[directory]?.contains(path) != true {
                let watch = inotify_add_watch(
                    changes, directory, UInt32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR))
                if watch >= 0 { state.directories[watch] = directory }
                state.paths[directory, default: []].insert(path)
            }
            guard la_exec_record_mark(group, path) == 0 else {
                return "\(path) cannot be watched (\(String(cString: strerror(errno))))"
            }
            state.watched.insert(file)
            // Only a path never watched before: a new file at a watched path (an upgrade) is not scanned, so a
            // program that set its executable to it meanwhile gets no record.
            guard scanning, state.scannedPaths.insert(path).inserted else { return nil }
            // Events queued before the scan are about processes as they were before it.
            drain(&state)
            for process in Self.processes(running: file) where state.records[process] == nil {
                state.records[process] = Record(file: file, ownExecPending: false, whenWatched: true)
            }
            return nil
        }
    }

    /// What the record says of process `pid` and the file it runs (what its `/proc/<pid>/exe` names, by device and
    /// inode); reads the kernel's queued process events first.
    package func verdict(_ pid: Int32, runs file: (device: UInt64, inode: UInt64)) -> Verdict {
        state.withLock { state in
            drain(&state)
            guard let record = state.records[pid], record.file == FileKey(device: file.device, inode: file.inode) else {
                return .notSeen
            }
            return record.whenWatched ? .runningWhenWatched : .executed
        }
    }

    /// Reads every queued process event: a recorded process that exec'd (other than the exec recorded) or exited
    /// loses its record; all records go when events were lost.
    private func drain(_ state: inout State) {
        var what: UInt32 = 0
        var thread: Int32 = 0
        var process: Int32 = 0
        var when: UInt64 = 0
        while true {
            switch la_proc_events_next(processEvents, &what, &thread, &process, &when) {
            case 0:
                return
            case 1:
                guard what == LA_PROC_EVENT_EXEC || what == LA_PROC_EVENT_EXIT else { continue }
                if what == LA_PROC_EVENT_EXEC, state.awaited.contains(process) { state.execs[process] = when }
                guard var record = state.records[process] else { continue }
                if what == LA_PROC_EVENT_EXEC && record.ownExecPending {
                    record.ownExecPending = false
                    state.records[process] = record
                } else {
                    state.records[process] = nil
                }
            default:
                if !state.records.isEmpty {
                    report(
                        "the kernel dropped process events: every exec record is void, and the programs of "
                            + "\(state.records.count) recorded processes hold no registration until they start again")
                }
                state.records.removeAll()
                return
            }
        }
    }

    /// A thread held at its exec of a watched file.
    private struct Trace {
        var file: FileKey
        var process: Int32
        /// When its permission event was read (CLOCK_MONOTONIC nanoseconds): its exec's event comes later.
        var since: UInt64
    }

    /// How long a permission event waits for its thread to be seized, counted from the tracer's attempt, before it
    /// is answered anyway (then that exec is not recorded). Seizing waits for the exec'ing thread's exec lock,
    /// which it holds while it opens an interpreter (a `#!` line naming a watched file): without the bound, that
    /// exec and every later one of a watched file would wait for ever.
    static let seizeWait: UInt64 = 2_000_000_000
    /// How long a permission event waits for the tracer to attempt the seize at all: on a machine whose processors
    /// are all busy a new thread may wait seconds to run, and an exec answered before its seize is not recorded
    /// (the program is then served as unregistered until it starts again).
    static let attemptWait: UInt64 = 30_000_000_000
    /// How long a seized thread is followed to its first stop before it is let go unrecorded (a thread stuck in the
    /// kernel; its tracer's exit detaches it).
    static let followLimit: Duration = .seconds(60)

    /// The record's thread: answers permission events, and reads process events as they come.
    private func run() {
        var events = [la_exec_event](repeating: la_exec_event(), count: 64)
        while true {
            var descriptors = [
                pollfd(fd: group, events: Int16(POLLIN), revents: 0),
                pollfd(fd: processEvents, events: Int16(POLLIN), revents: 0),
                pollfd(fd: changes, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&descriptors, 3, -1)
            if descriptors[2].revents != 0 { filesChanged() }
            state.withLock { drain(&$0) }
            while true {
                let count = la_exec_record_read(group, &events, Int32(events.count))
                guard count > 0 else { break }
                for event in events[0..<Int(count)] {
                    hold(event)
                    la_exec_record_answer(group, event.descriptor)
                }
            }
        }
    }

    /// Where a seize stands: the thread that seizes and the record's thread that answers race for it; the first
    /// to move it from pending wins.
    private final class SeizeRace: Sendable {
        static let pending = 0
        static let seizedInTime = 1
        static let answeredFirst = 2
        private let state = Atomic<Int>(SeizeRace.pending)
        /// When the tracer began the seize (CLOCK_MONOTONIC nanoseconds); 0 before.
        let attempted = Atomic<UInt64>(0)

        /// Moves the race from pending to `outcome`; whether this call did.
        func settle(_ outcome: Int) -> Bool {
            state.compareExchange(expected: Self.pending, desired: outcome, ordering: .acquiringAndReleasing).exchanged
        }
    }

    /// Has a thread of its own seize the thread of a permission event for a watched file, and waits (a bounded
    /// while) for the seize before the event is answered; lets every other event go untouched.
    private func hold(_ event: la_exec_event) {
        let file = FileKey(device: event.device, inode: event.inode)
        // A thread of another pid namespace has no number here (0): nothing it connects with can be identified.
        guard event.thread > 0, state.withLock({ $0.watched.contains(file) }) else { return }
        let process = Self.threadGroup(of: event.thread) ?? event.thread
        let trace = Trace(file: file, process: process, since: Self.monotonicNow())
        state.withLock { _ = $0.awaited.insert(process) }
        let seized = DispatchSemaphore(value: 0)
        let race = SeizeRace()
        let tracer = Thread { [self] in follow(event.thread, trace, seized: seized, race: race) }
        tracer.name = "exec trace"
        tracer.start()
        // Waits for the seize for `seizeWait` from the tracer's attempt (a thread that was not yet run has not
        // tried), and for `attemptWait` in all.
        let started = Self.monotonicNow()
        while seized.wait(timeout: .now() + .milliseconds(50)) == .timedOut {
            let now = Self.monotonicNow()
            let attempted = race.attempted.load(ordering: .acquiring)
            if attempted != 0 && now - attempted >= Self.seizeWait { break }
            if now - started >= Self.attemptWait { break }
        }
        if race.settle(SeizeRace.answeredFirst) {
            let attempted = race.attempted.load(ordering: .acquiring)
            let tried = attempted == 0 ? "never tried" : "tried after \((attempted - trace.since) / 1_000_000) ms"
            report(
                unrecorded(
                    trace,
                    "it could not be held in time (answered after \((Self.monotonicNow() - trace.since) / 1_000_000) "
                        + "ms; the tracer \(tried)): an interpreter line naming the program, or a kernel that opens "
                        + "it under its exec lock"))
        }
    }

    /// On a thread of its own (the tracer: ptrace binds a tracee to it): seizes `thread`, then takes its first
    /// stop. A stop at the end of an exec is a record when the new program is the watched file; any other stop is
    /// an exec that failed. A thread that exec'd while not its process's first reports its stop under the
    /// process's id. The tracer's exit detaches whatever it still traces.
    private func follow(_ thread: Int32, _ trace: Trace, seized: DispatchSemaphore, race: SeizeRace) {
        defer { state.withLock { forget(trace, &$0) } }
        race.attempted.store(Self.monotonicNow(), ordering: .releasing)
        guard la_trace_seize(thread) == 0 else {
            let reason = String(cString: strerror(errno))
            seized.signal()
            report(unrecorded(trace, "it cannot be traced (\(reason)); that process holds no registration"))
            return
        }
        let inTime = race.settle(SeizeRace.seizedInTime)
        seized.signal()
        // Seized after the answer: the exec may have finished and its program run; nothing of it is recorded.
        guard inTime else { return }
        let deadline = ContinuousClock.now + Self.followLimit
        var pause: UInt32 = 200
        while ContinuousClock.now < deadline {
            var message: UInt = 0
            var signal: Int32 = 0
            var id = thread
            var outcome = la_trace_poll(thread, &message, &signal)
            if outcome == 4 || (outcome == 0 && trace.process != thread) {
                let asProcess = la_trace_poll(trace.process, &message, &signal)
                if asProcess != 4 && asProcess != 0 || outcome == 4 {
                    id = trace.process
                    outcome = asProcess
                }
            }
            switch outcome {
            case 1:
                record(id, trace)
                la_trace_detach(id, 0)
                return
            case 2:
                // An exec that failed: any program may make one fail on purpose, so it is not reported (the log
                // would be flooded).
                la_trace_detach(id, signal)
                return
            case 0:
                usleep(pause)
                pause = min(pause * 2, 100_000)
            case 3:
                // Ended during its exec (killed): not reported either.
                return
            default:
                // Neither the thread nor its process is traced here any more (4), or an error.
                report(unrecorded(trace, "its trace was lost (\(outcome == 4 ? "no such tracee" : "an error"))"))
                return
            }
        }
        report(unrecorded(trace, "it did not stop within \(Self.followLimit) of its exec"))
    }

    /// What a report says of a traced exec that left no record.
    private func unrecorded(_ trace: Trace, _ why: String) -> String {
        "an exec of a registered program by process \(trace.process) was not recorded: \(why)"
    }

    /// Records process `id`, stopped at the end of its exec, when its executable is the traced file.
    private func record(_ id: Int32, _ trace: Trace) {
        var info = stat()
        let runs = stat("/proc/\(id)/exe", &info) == 0
        guard runs, FileKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)) == trace.file else {
            report(unrecorded(trace, runs ? "at the end of its exec it runs another file" : "it is gone"))
            return
        }
        state.withLock { state in
            drain(&state)
            // The exec's own event came already when one is queued later than the permission event.
            let ownExecSeen = (state.execs[id] ?? 0) >= trace.since
            state.records[id] = Record(file: trace.file, ownExecPending: !ownExecSeen, whenWatched: false)
        }
    }

    private func forget(_ trace: Trace, _ state: inout State) {
        state.awaited.remove(trace.process)
        state.execs[trace.process] = nil
    }

    /// Watches again every path in a directory inotify reported a change in (a file renamed over a watched one).
    private func filesChanged() {
        var buffer = [UInt8](repeating: 0, count: 8192)
        var changed: Set<String> = []
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(changes, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let (watch, length) = buffer.withUnsafeBytes { bytes in
                    (
                        bytes.load(fromByteOffset: offset, as: Int32.self),
                        Int(bytes.load(fromByteOffset: offset + 12, as: UInt32.self))
                    )
                }
                if let directory = state.withLock({ $0.directories[watch] }) { changed.insert(directory) }
                offset += MemoryLayout<inotify_event>.size + length
            }
        }
        let paths = state.withLock { state in changed.flatMap { state.paths[$0] ?? [] } }
        // Not scanned: a process that ran the new file before it was marked gets no record (it must start again),
        // or a program that had set its executable to that file would, whenever its directory changed.
        for path in paths { _ = watch(path, scanning: false) }
    }

    /// The processes whose executable is `file` now.
    private static func processes(running file: FileKey) -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry in
            guard let pid = Int32(entry) else { return nil }
            var info = stat()
            guard stat("/proc/\(entry)/exe", &info) == 0,
                FileKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)) == file
            else { return nil }
            return pid
        }
    }

    /// What keeps this process from tracing an exec'ing thread, nil when nothing does: `CAP_SYS_PTRACE` missing
    /// from its effective capabilities, or Yama's `ptrace_scope` 3 (no tracing at all). Without it every exec of a
    /// watched file would go unrecorded, and every registered program would be refused.
    private static func missingPrivilege() -> String? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let effective = UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return "its capabilities cannot be read" }
        guard effective & (1 << 19) != 0 else { return "localauthd lacks CAP_SYS_PTRACE" }
        // Before Linux 6.8 (commit "execve: open the executable file before doing anything else") the executable
        // is opened, and its permission event sent, while the exec holds the lock a seize waits for: no exec could
        // be held in time, and every registered program would be refused.
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2, numbers[0] > 6 || (numbers[0] == 6 && numbers[1] >= 8) else {
            return "Linux \(release) opens an executable under its exec lock (before 6.8): an exec cannot be held"
        }
        if let scope = try? String(contentsOfFile: "/proc/sys/kernel/yama/ptrace_scope", encoding: .utf8),
            scope.trimmingCharacters(in: .whitespacesAndNewlines) == "3"
        {
            return "kernel.yama.ptrace_scope is 3: no process may trace another"
        }
        return nil
    }

    /// The process a thread belongs to (`Tgid:` of its status), nil when it is gone.
    private static func threadGroup(of thread: Int32) -> Int32? {
        guard let status = try? String(contentsOfFile: "/proc/\(thread)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Tgid:") {
            return Int32(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    private static func monotonicNow() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
