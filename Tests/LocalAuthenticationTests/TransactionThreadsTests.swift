import Foundation
import Synchronization
import TestSupport
import Testing
import WorkThreads

/// Where PAM transactions run (issue 47, attack 5): one key's transaction waiting on its user holds up no other
/// key's; the same key's next one waits for it; the total caps how many run at once.
///
/// The tasks that start the transactions, and the waits, need the cooperative pool, which the embedded pass's
/// blocking suites hold for half a minute at a time on two cores (measured: this suite took 20 s in a pass that
/// ran it in 1.3 s alone, and 64 s when it failed its 30 s waits): each wait allows `eventDeadline`, and ends as
/// soon as its event happens.
@Suite("Transaction threads")
struct TransactionThreadsTests {
    static let eventDeadline = Duration.seconds(180)

    /// What ran, in order, by name.
    final class Journal: Sendable {
        private let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    @Test func aKeyWaitingOnItsUserHoldsUpOnlyItsOwnNextTransaction() async throws {
        let threads = TransactionThreads(name: "test", total: 4)
        let journal = Journal()
        let gate = DispatchSemaphore(value: 0)
        let held = Task {
            try await threads.run(for: "m") {
                journal.add("m1"); gate.wait()
            }
        }
        #expect(await waitUntil(within: Self.eventDeadline) { journal.all.contains("m1") })
        try await threads.run(for: "v") { journal.add("v") }
        #expect(journal.all == ["m1", "v"], "another key ran while m waited")
        let next = Task { try await threads.run(for: "m") { journal.add("m2") } }
        // A wrong start would show within this time; a right one cannot happen before the gate opens.
        try await Task.sleep(for: .milliseconds(300))
        #expect(!journal.all.contains("m2"), "m's next transaction waits for m's first")
        gate.signal()
        try await held.value
        try await next.value
        #expect(journal.all == ["m1", "v", "m2"])
    }

    @Test func theTotalCapsTransactionsRunningAtOnce() async throws {
        let threads = TransactionThreads(name: "test", total: 2)
        let journal = Journal()
        let gate = DispatchSemaphore(value: 0)
        let first = Task {
            try await threads.run(for: "a") {
                journal.add("a"); gate.wait()
            }
        }
        let second = Task {
            try await threads.run(for: "b") {
                journal.add("b"); gate.wait()
            }
        }
        #expect(await waitUntil(within: Self.eventDeadline) { journal.all.count == 2 })
        let third = Task { try await threads.run(for: "c") { journal.add("c") } }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!journal.all.contains("c"), "a third key waits while two run")
        #expect(threads.runningKeys == ["a", "b"])
        gate.signal()
        #expect(await waitUntil(within: Self.eventDeadline) { journal.all.contains("c") })
        gate.signal()
        try await first.value
        try await second.value
        try await third.value
        #expect(threads.runningKeys.isEmpty)
    }
}
