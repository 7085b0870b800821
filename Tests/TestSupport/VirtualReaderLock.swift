import Authenticators
import Foundation
import Testing

/// A turn around each test of a suite. ``virtualReaderLock`` is ``VirtualReaderEnvironment/lock``, so no other test
/// of the test process (whatever its target) runs a libfprint reader at the same time: libfprint's virtual driver
/// is configured through process-wide environment variables.
///
/// Tests that scan fingers only on their daemons' readers (each `localauthd` a process with its own reader socket
/// and variables) need no share of this process's reader: they take ``daemonReaderTurn(timeLimit:)`` instead, a
/// turn of their own, one such test at a time beside the in-process reader tests, so that a scan's exchange with
/// a daemon's driver competes for the two cores with one other reader test, not with every one. Daemon suites that
/// scan no finger take neither. (The reader lock used to serialise every daemon suite with every in-process reader
/// suite, and that one chain was as long as the embedded pass.)
///
/// The trait also carries the suite's time limit, counted from the moment the test holds the lock. swift-testing's
/// `.timeLimit` counts the wait for the lock too (it wraps every scoping trait): on a slow machine a one-minute test
/// queued behind other suites' readers ran out of time while waiting, was cancelled moments after it got the
/// reader, and held the lock a further minute while its scans timed out, so the tests queued behind it stalled too.
package struct VirtualReaderLock: SuiteTrait, TestTrait, TestScoping {
    /// How long one test may run once it holds the lock; nil: no limit.
    let timeLimit: Duration?
    /// Whether the lock is this process's reader (``VirtualReaderEnvironment/lock``) or the daemon suites' turn.
    let isThisProcesssReader: Bool

    /// The daemon suites' turn (``daemonReaderTurn(timeLimit:)``).
    private static let daemonTurn = AsyncLock()

    /// Whether the current task runs a test that holds the lock: only such a test may point the process-wide
    /// variables at its reader (``WorldReader``). A suite without the lock that set them would move them under
    /// the test that holds it, whose engine then opens that other reader, and whose children inherit it.
    @TaskLocal package static var isHeld = false

    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if test.isSuite { return try await function() }
        let asked = ContinuousClock.now
        try await (isThisProcesssReader ? VirtualReaderEnvironment.lock : Self.daemonTurn).withLock {
            let got = ContinuousClock.now
            defer {
                Self.recordHold(
                    of: test, testCase: testCase, turn: isThisProcesssReader ? "reader" : "daemons",
                    waited: got - asked, held: .now - got)
            }
            try await Self.$isHeld.withValue(isThisProcesssReader) {
                guard let timeLimit else { return try await function() }
                try await Self.run(function, timeLimit: timeLimit, test: test)
            }
        }
    }

    /// Appends how long `test` waited for its turn and held it to the file `LA_TEST_READER_LOG` names, when set:
    /// `scripts/run-tests` sums the holds of each turn, since the tests that take one run one after another and
    /// the sum bounds how short a pass can be.
    private static func recordHold(
        of test: Test, testCase: Test.Case?, turn: String, waited: Duration, held: Duration
    ) {
        guard let path = ProcessInfo.processInfo.environment["LA_TEST_READER_LOG"] else { return }
        let seconds = { (duration: Duration) in
            String(format: "%.1f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        }
        let name = test.id.nameComponents.joined(separator: ".")
        let caseNote = testCase?.isParameterized == true ? " (one case)" : ""
        let line = "\(seconds(held)) held, \(seconds(waited)) waited, \(turn): \(name)\(caseNote)\n"
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        _ = line.withCString { write(descriptor, $0, strlen($0)) }
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
                        "Time limit was exceeded: \(timeLimit) after the test got its turn",
                        sourceLocation: test.sourceLocation)
                }
            }
        }
    }
}

extension Trait where Self == VirtualReaderLock {
    /// One reader user at a time across the whole test process, without a time limit of its own.
    package static var virtualReaderLock: VirtualReaderLock {
        VirtualReaderLock(timeLimit: nil, isThisProcesssReader: true)
    }

    /// One reader user at a time across the whole test process; each test may run `timeLimit` once it holds the
    /// reader (use this instead of `.timeLimit`, which also counts the wait for the reader).
    package static func virtualReaderLock(timeLimit: Duration) -> VirtualReaderLock {
        VirtualReaderLock(timeLimit: timeLimit, isThisProcesssReader: true)
    }

    /// One test at a time among those that scan fingers on their daemons' readers (never this process's): beside
    /// the in-process reader tests, not after them. Each test may run `timeLimit` once it has its turn.
    package static func daemonReaderTurn(timeLimit: Duration) -> VirtualReaderLock {
        VirtualReaderLock(timeLimit: timeLimit, isThisProcesssReader: false)
    }
}
