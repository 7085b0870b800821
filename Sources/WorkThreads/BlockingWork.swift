import Dispatch

/// Threads for work that blocks (the engine's store code, a synchronous keychain edge called from async code):
/// async callers await it here instead of blocking a thread of Swift's cooperative pool.
package enum BlockingWork {
    private static let queue = DispatchQueue(label: "local-authentication.blocking", attributes: .concurrent)

    /// Runs `body` on a thread that may block and returns its result to the awaiting task.
    package static func run<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}
