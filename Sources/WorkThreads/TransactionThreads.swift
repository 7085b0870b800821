import Foundation
import Synchronization

/// Threads for blocking transactions that belong to someone (a PAM transaction and the questions it puts to its
/// user): each runs on a thread of its own, at most one at a time for one key (a user and a kind of work) and at
/// most ``total`` at a time in all. One key's transaction waiting on its user never delays another key's beyond the
/// time to start a thread; a transaction over either limit waits, suspended, for a slot, in arrival order.
///
/// The per-key limit of one keeps a user's transactions in order (PAM's attempt counting reserves a try right
/// before its transaction, so guesses queued behind it see its count); the total bounds the threads a flood of
/// users can hold.
package final class TransactionThreads: Sendable {
    /// The most transactions that run at once, over all keys.
    package let total: Int

    private struct State {
        var running: Set<String> = []
        var waiting: [(key: String, start: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    private let name: String

    /// Threads named `name` (shown by debuggers and `top -H`), at most `total` at once.
    package init(name: String, total: Int) {
        precondition(total > 0)
        self.name = name
        self.total = total
    }

    /// Runs `body` on a thread of its own once `key` has no transaction running and fewer than ``total`` run, and
    /// returns its result to the awaiting task (suspended, never blocking a thread of the cooperative pool).
    ///
    /// Cancelling the task does not interrupt `body`: a transaction that may wait on its user takes its own
    /// cancellation check, and its questions their own deadline.
    package func run<Result: Sendable>(
        for key: String, _ body: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        await acquire(key)
        let name = self.name
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                nameCurrentThread(name)
                let result = Swift.Result { try body() }
                self.release(key)
                continuation.resume(with: result)
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// The transactions running now, by key (for tests and the daemon's status).
    package var runningKeys: Set<String> { state.withLock { $0.running } }

    private func acquire(_ key: String) async {
        await withCheckedContinuation { (start: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.waiting.isEmpty || !state.waiting.contains(where: { $0.key == key }),
                    !state.running.contains(key), state.running.count < total
                else {
                    state.waiting.append((key, start))
                    return false
                }
                state.running.insert(key)
                return true
            }
            if now { start.resume() }
        }
    }

    private func release(_ key: String) {
        let next = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running.remove(key)
            var started: [CheckedContinuation<Void, Never>] = []
            var index = 0
            while index < state.waiting.count && state.running.count < total {
                let candidate = state.waiting[index]
                if state.running.contains(candidate.key) {
                    index += 1
                    continue
                }
                state.running.insert(candidate.key)
                state.waiting.remove(at: index)
                started.append(candidate.start)
            }
            return started
        }
        for start in next { start.resume() }
    }
}
