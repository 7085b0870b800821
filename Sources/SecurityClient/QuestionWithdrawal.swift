import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One question's way to end before the user answers it: its request ended while the presenter was still asking
/// (the request was answered another way, its context invalidated, or localauthd gave up at its deadline). A
/// presenter that waits on a file descriptor (the terminal) waits on ``fileDescriptor`` too; ``current`` is the
/// question the presenter queue is asking now.
package final class QuestionWithdrawal: Sendable {
    /// The question being asked on this thread (the presenter queue's, inside a question's callback); nil
    /// elsewhere.
    @TaskLocal package static var current: QuestionWithdrawal?

    /// Readable once the question is withdrawn (a pipe's end); -1 when none could be made, and then only
    /// ``isWithdrawn`` tells.
    package let fileDescriptor: Int32
    private let writeEnd: Int32
    private let withdrawn = Atomic<Bool>(false)

    package init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        (fileDescriptor, writeEnd) = (ends[0], ends[1])
    }

    deinit {
        if fileDescriptor >= 0 { close(fileDescriptor) }
        if writeEnd >= 0 { close(writeEnd) }
    }

    /// Whether the question was withdrawn.
    package var isWithdrawn: Bool { withdrawn.load(ordering: .acquiring) }

    /// Withdraws the question: ``fileDescriptor`` becomes readable. Called once its request is over.
    package func withdraw() {
        guard !withdrawn.exchange(true, ordering: .acquiringAndReleasing), writeEnd >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }
}

/// The questions of one request: the one being asked, and whether the request is over (a question not asked yet
/// is then not asked at all).
final class RequestQuestions: Sendable {
    private struct State {
        var over = false
        var asking: QuestionWithdrawal?
    }

    private let state = Mutex(State())

    /// Asks through `body` with a withdrawal of its own, unless the request is already over (then nil).
    func ask<T>(_ body: () -> T?) -> T? {
        let withdrawal = QuestionWithdrawal()
        let started = state.withLock { state -> Bool in
            guard !state.over else { return false }
            state.asking = withdrawal
            return true
        }
        guard started else { return nil }
        defer { state.withLock { $0.asking = nil } }
        return QuestionWithdrawal.$current.withValue(withdrawal) { body() }
    }

    /// The request is over: the question being asked is withdrawn, and none is asked afterwards.
    func end() {
        let asking = state.withLock { state -> QuestionWithdrawal? in
            state.over = true
            return state.asking
        }
        asking?.withdraw()
    }
}
