internal import CFPrint
import Foundation
import SecurityProtocol

/// The cancellation handle of one libfprint operation: a `GCancellable` that any thread may cancel (task
/// cancellation, or the per-attempt timeout), remembering which of the two fired.
// Safe to share: `g_cancellable_cancel` is documented thread-safe; `reason`, `generation` and `finished` are only
// touched under `lock`; the GCancellable pointer itself never changes and is released in deinit.
final class OperationCancellation: @unchecked Sendable {
    enum Reason: Sendable { case task, timeout }

    let cancellable: UnsafeMutablePointer<GCancellable>
    private let lock = NSLock()
    private var reason: Reason?
    private var generation = 0
    private var finished = false

    init() {
        cancellable = g_cancellable_new()
    }

    deinit {
        g_object_unref(cancellable)
    }

    /// Cancels the operation, recording why (the first reason wins).
    ///
    /// The `GCancellable` is not cancelled on the calling thread: libfprint 1.94.5 runs its "cancelled" handlers
    /// on whichever thread cancels, and they race with the libfprint thread finishing the operation (observed as
    /// `g_source_unref: assertion 'source != NULL'` and an idle cancel source left behind for the next operation).
    /// Instead an idle source on the global default main context, which the libfprint thread's `*_sync` call is
    /// pumping, cancels it there; `g_idle_add_full` is thread-safe and wakes that context at once.
    func cancel(_ why: Reason) {
        let first = lock.withLock { () -> Bool in
            guard reason == nil && !finished else { return false }
            reason = why
            return true
        }
        guard first else { return }
        g_idle_add_full(
            G_PRIORITY_HIGH,
            { cancellable in
                g_cancellable_cancel(cancellable?.assumingMemoryBound(to: GCancellable.self))
                return 0  // G_SOURCE_REMOVE
            }, g_object_ref(cancellable), { g_object_unref($0) })
    }

    /// Why the operation was cancelled, if it was.
    var cancellationReason: Reason? { lock.withLock { reason } }

    /// Starts (or restarts) the attempt deadline: unless re-armed or finished first, the operation is cancelled
    /// with reason `.timeout` after `timeout`.
    func arm(_ timeout: Duration) {
        let current = lock.withLock { () -> Int in
            generation += 1
            return generation
        }
        let nanoseconds =
            Int(timeout.components.seconds) * 1_000_000_000
            + Int(timeout.components.attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
            guard let self else { return }
            let expired = self.lock.withLock { self.generation == current && !self.finished }
            if expired { self.cancel(.timeout) }
        }
    }

    /// Stops the deadline: the operation is over.
    func finish() {
        lock.withLock { finished = true }
    }
}
