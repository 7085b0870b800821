import Foundation

/// The first element `stream` yields within `limit`; nil when the stream ends first or the time passes (the reading
/// task is then cancelled, which ends the stream's wait).
package func firstElement<Element: Sendable>(
    of stream: AsyncStream<Element>, within limit: Duration
) async -> Element? {
    let reader = Task {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next()
    }
    let timer = Task {
        try? await Task.sleep(for: limit)
        reader.cancel()
    }
    defer { timer.cancel() }
    return await reader.value
}

/// Waits until `condition` holds, checking every 10 ms, for at most `limit`; whether it held. For a test that must
/// wait for an event it can observe (a prompt shown, a state reached) instead of sleeping a guessed while.
package func waitUntil(within limit: Duration = .seconds(10), _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + limit
    while true {
        if try condition() { return true }
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
}

/// Waits for `semaphore` on a thread of its own, not the cooperative pool's; false after `seconds`.
package func signalled(_ semaphore: DispatchSemaphore, within seconds: Double = 10) async -> Bool {
    await onOwnThread { semaphore.wait(timeout: .now() + seconds) == .success }
}

/// Runs `body` on a thread of its own and returns its result: for a test loop that must keep its own pace (polls
/// at fixed intervals, blocking calls) whatever the cooperative pool, which other suites' blocking waits can hold
/// on a 2-core machine, is doing.
package func onOwnThread<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Swift.Result { try body() }) }
        thread.start()
    }
}

/// ``onOwnThread(_:)`` for a body that cannot throw.
package func onOwnThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}

// The blocking waits below have async twins that wait on a thread of their own. An async test picks the twin (Swift
// prefers the async overload in an async context), so a test that waits seconds for a prompt or a child no longer
// holds one of the cooperative pool's threads (two on CI) that every other running suite needs.

extension PseudoTerminal {
    /// ``waitFor(_:timeout:)-(_,_)`` off the cooperative pool.
    package func waitFor(_ text: String, timeout: Double) async -> Bool {
        await onOwnThread { self.waitFor(text, timeout: timeout) }
    }

    /// ``waitForEchoOff(timeout:)-(_)`` off the cooperative pool.
    package func waitForEchoOff(timeout: Double) async -> Bool {
        await onOwnThread { self.waitForEchoOff(timeout: timeout) }
    }
}

extension SpawnedProcess {
    /// ``wait(timeout:)-(_)`` off the cooperative pool.
    package func wait(timeout: Double) async -> (status: Int32, bySignal: Bool)? {
        await onOwnThread { self.wait(timeout: timeout) }
    }
}

/// ``runCapturingOutput(_:_:environment:input:)-(_,_,_,_)`` off the cooperative pool.
package func runCapturingOutput(
    _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, input: String? = nil
) async throws -> (status: Int32, output: String) {
    try await onOwnThread { try runCapturingOutput(executable, arguments, environment: environment, input: input) }
}
