import CSocket
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's process events (the proc connector): which connected processes executed another program or exited,
/// so that ``PeerProcess/isCurrent`` resolves `/proc/<pid>/exe` only for those, instead of on every request.
///
/// Sound because of where the kernel reports an `exec`: it queues the event on this socket inside the `execve` call,
/// before the new program runs a single instruction. A request the new program sends therefore arrives after its
/// event, and the check of that request drains the queue first (``drain()``) and sees it. When the queue overflows
/// and events are lost (`ENOBUFS`), every watched process is checked the full way once. Where the kernel does not
/// deliver events to localauthd (without `CAP_NET_ADMIN`, or in another pid namespace, found by a test event at
/// start), ``shared`` is nil and every request takes the full check.
package final class ProcessEvents: Sendable {
    /// The daemon's subscription, nil where process events are unavailable (see above) or turned off with
    /// `LA_PROCESS_EVENTS=0`.
    package static let shared: ProcessEvents? = {
        if let setting = getenv("LA_PROCESS_EVENTS"), String(cString: setting) == "0" { return nil }
        return ProcessEvents()
    }()

    /// A watched process: ``stale`` is set when it executed or exited (or events were lost) since it was last checked.
    package final class Watcher: Sendable {
        package let pid: Int32
        let stale = Atomic<Bool>(false)

        init(pid: Int32) {
            self.pid = pid
        }

        /// Whether the process may have changed since the last call: clears the mark (a later event sets it again).
        package func takeStale() -> Bool {
            stale.exchange(false, ordering: .acquiringAndReleasing)
        }
    }

    private let descriptor: Int32
    /// The watchers of each process, by thread-group id.
    private let watchers = Mutex<[Int32: [ObjectIdentifier: Watcher]]>([:])

    /// A subscription whose queue holds `receiveBuffer` bytes of events (the kernel doubles it); nil where events
    /// do not arrive.
    package init?(receiveBuffer: Int32 = 1 << 20) {
        let descriptor = la_proc_events_open(receiveBuffer)
        guard descriptor >= 0 else { return nil }
        guard la_proc_events_work(descriptor, 1_000) == 1 else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        // Emptied before anyone is watched: an overflow during the test would otherwise leave the queue congested,
        // and the kernel reports no further loss until it is empty (see `drain()`).
        drain()
    }

    deinit {
        close(descriptor)
    }

    /// Starts watching process `pid` (before its executable is first read, so no later `exec` goes unseen).
    package func watch(_ pid: Int32) -> Watcher {
        let watcher = Watcher(pid: pid)
        watchers.withLock { $0[pid, default: [:]][ObjectIdentifier(watcher)] = watcher }
        return watcher
    }

    package func unwatch(_ watcher: Watcher) {
        watchers.withLock { watchers in
            watchers[watcher.pid]?[ObjectIdentifier(watcher)] = nil
            if watchers[watcher.pid]?.isEmpty == true { watchers[watcher.pid] = nil }
        }
    }

    /// Takes every queued event, marking the watchers of each process that executed or exited; all of them when
    /// events were lost or the socket failed.
    ///
    /// The queue is read to its end even after a loss is reported. The kernel reports a loss (`ENOBUFS`) only once
    /// until the queue has been emptied, and drops later events silently meanwhile. So every watcher is marked at
    /// the end, after the read that found the queue empty: any event dropped before then is covered by that mark,
    /// and any loss after it is reported again. Returns whether events were lost.
    @discardableResult package func drain() -> Bool {
        watchers.withLock { watchers in
            var what: UInt32 = 0
            var thread: Int32 = 0
            var process: Int32 = 0
            var lost = false
            reading: while true {
                switch la_proc_events_next(descriptor, &what, &thread, &process, nil) {
                case 0:
                    break reading
                case 1:
                    guard what == LA_PROC_EVENT_EXEC || what == LA_PROC_EVENT_EXIT else { continue }
                    watchers[process]?.values.forEach { $0.stale.store(true, ordering: .releasing) }
                case -2:
                    lost = true
                default:
                    lost = true
                    break reading
                }
            }
            guard lost else { return false }
            for group in watchers.values {
                group.values.forEach { $0.stale.store(true, ordering: .releasing) }
            }
            return true
        }
    }
}
