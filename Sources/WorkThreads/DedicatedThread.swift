import Foundation

/// One long-lived operating-system thread that runs submitted jobs one at a time, in submission order.
///
/// PAM and libfprint are blocking C libraries with thread affinity rules (libfprint's `*_sync` calls pump GLib's
/// global default main context; PAM handles must not be used from two threads at once). Each library gets one of
/// these, so its calls never overlap and never block Swift's cooperative thread pool. Async callers get results
/// through a checked continuation.
package final class DedicatedThread: Sendable {
    /// The queue shared between submitters and the thread.
    // Safe to share: `jobs` and `stopped` are only read or written while `condition` is locked.
    private final class JobQueue: @unchecked Sendable {
        let condition = NSCondition()
        var jobs: [@Sendable () -> Void] = []
        var stopped = false

        func next() -> (@Sendable () -> Void)? {
            condition.lock()
            defer { condition.unlock() }
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty { return nil }
            return jobs.removeFirst()
        }
    }

    private let queue = JobQueue()

    /// Starts a thread named `name` (shown by debuggers and `top -H`).
    package init(name: String) {
        let queue = self.queue
        let thread = Thread {
            nameCurrentThread(name)
            while let job = queue.next() { job() }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    deinit {
        queue.condition.lock()
        queue.stopped = true
        queue.condition.signal()
        queue.condition.unlock()
    }

    /// Queues `job` to run on the thread; returns at once.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        queue.condition.lock()
        queue.jobs.append(job)
        queue.condition.signal()
        queue.condition.unlock()
    }

    /// Runs `body` on the thread and returns its result to the awaiting task.
    ///
    /// The caller's task is suspended, not blocked. Cancelling the task does not interrupt `body`; operations
    /// that can be interrupted take their own cancellation handle (a `GCancellable`).
    package func run<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
            submit { continuation.resume(with: Swift.Result { try body() }) }
        }
    }

    /// Runs `body` on the thread and blocks the calling (non-cooperative) thread until it is done.
    package func runAndWait<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) throws -> Result {
        let box = ResultBox<Result>()
        let done = DispatchSemaphore(value: 0)
        submit {
            box.set(Swift.Result { try body() })
            done.signal()
        }
        done.wait()
        return try box.get()
    }
}

/// A one-shot result slot handed between two threads.
// Safe to share: the value is written once under `lock` before the semaphore is signalled and read under `lock` after.
private final class ResultBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<Value, any Error>?

    func set(_ result: Result<Value, any Error>) {
        lock.withLock { self.result = result }
    }

    func get() throws -> Value {
        try lock.withLock { result! }.get()
    }
}
