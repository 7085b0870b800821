import Synchronization

/// An asynchronous mutual-exclusion lock: waiters suspend (they never block a thread) and enter in arrival order.
package final class AsyncLock: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// An unlocked lock.
    package init() {}

    /// Runs `body` while holding the lock.
    package func withLock<Result: Sendable>(_ body: () async throws -> Result) async rethrows -> Result {
        await lock()
        defer { unlock() }
        return try await body()
    }

    private func lock() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state -> Bool in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if acquired { continuation.resume() }
        }
    }

    private func unlock() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

/// libfprint reads its reader selection (`FP_DRIVERS_WHITELIST`, `FP_VIRTUAL_DEVICE`…) from the process
/// environment when a context enumerates readers, so code that sets those variables and uses a reader (tests
/// driving the virtual reader, from any test target of the process) holds this lock meanwhile.
package enum VirtualReaderEnvironment {
    /// The process-wide lock around libfprint's environment.
    package static let lock = AsyncLock()
}
