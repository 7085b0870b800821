import Authenticators
import Testing

/// Holds ``VirtualReaderEnvironment/lock`` around each test of a suite, so no other suite of the test process
/// (whatever its target) runs a libfprint reader at the same time: libfprint's virtual driver is configured
/// through process-wide environment variables.
///
/// The trait also carries the suite's time limit, counted from the moment the test holds the lock. swift-testing's
/// `.timeLimit` counts the wait for the lock too (it wraps every scoping trait): on a slow machine a one-minute test
/// queued behind other suites' readers ran out of time while waiting, was cancelled moments after it got the
/// reader, and held the lock a further minute while its scans timed out, so the tests queued behind it stalled too.
package struct VirtualReaderLock: SuiteTrait, TestTrait, TestScoping {
    /// How long one test may run once it holds the lock; nil: no limit.
    let timeLimit: Duration?

    /// Whether the current task runs a test that holds the lock: only such a test may point the process-wide
    /// variables at its reader (``WorldReader``). A suite without the lock that set them would move them under
    /// the test that holds it, whose engine then opens that other reader, and whose children inherit it.
    @TaskLocal package static var isHeld = false

    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if test.isSuite { return try await function() }
        try await VirtualReaderEnvironment.lock.withLock {
            try await Self.$isHeld.withValue(true) {
                guard let timeLimit else { return try await function() }
                try await Self.run(function, timeLimit: timeLimit, test: test)
            }
        }
    }

    /// Runs `function`; when it is still running after `timeLimit`, records the overrun as the test's issue,
    /// cancels it and waits for it to end, as swift-testing's time limit does.
    private static func run(
        _ function: @Sendable () async throws -> Void, timeLimit: Duration, test: Test
    ) async throws {
        try await withoutActuallyEscaping(function) { function in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await function()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: timeLimit)
                    return false
                }
                defer { group.cancelAll() }
                // The first to end decides; the other is cancelled (the test's errors and issues stay its own).
                let finishedInTime = try await group.next() ?? true
                if !finishedInTime {
                    Issue.record(
                        "Time limit was exceeded: \(timeLimit) after the test got the virtual reader",
                        sourceLocation: test.sourceLocation)
                }
            }
        }
    }
}

extension Trait where Self == VirtualReaderLock {
    /// One reader user at a time across the whole test process, without a time limit of its own.
    package static var virtualReaderLock: VirtualReaderLock { VirtualReaderLock(timeLimit: nil) }

    /// One reader user at a time across the whole test process; each test may run `timeLimit` once it holds the
    /// reader (use this instead of `.timeLimit`, which also counts the wait for the reader).
    package static func virtualReaderLock(timeLimit: Duration) -> VirtualReaderLock {
        VirtualReaderLock(timeLimit: timeLimit)
    }
}
