import Foundation
import Synchronization

/// Runs async work for synchronous callers, which block their own thread until it is done, as Apple's do while a
/// prompt is shown: on the client, Apple's synchronous edges (`canEvaluatePolicy`, `invalidate()`); in the engine,
/// the keychain's access-control checks, which run inside synchronous store code and may have to evaluate.
///
/// The work runs with a task executor of its own (one dedicated thread), not on Swift's cooperative pool, so a
/// caller that blocks a pool thread cannot starve the work it waits for. The slow parts (PAM, libfprint) run on
/// the authenticators' own threads; this thread only glues their steps together.
package enum BlockingBridge {
    package static let executor = ThreadTaskExecutor(name: "la.evaluation")

    /// Runs `body` to completion and returns its result, blocking the calling thread meanwhile.
    ///
    /// Never call it from the work it runs (that would wait for itself).
    package static func wait<Value: Sendable>(_ body: @escaping @Sendable () async throws -> Value) throws -> Value {
        let outcome = Mutex<Result<Value, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: executor) {
            let result: Result<Value, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }
}

/// A task executor whose jobs run one at a time on one dedicated thread.
package final class ThreadTaskExecutor: TaskExecutor {
    private let thread: DedicatedThread

    init(name: String) {
        thread = DedicatedThread(name: name)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        thread.submit { job.runSynchronously(on: executor) }
    }
}
