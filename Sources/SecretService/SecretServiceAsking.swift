import Synchronization

/// The connections whose secret read waits for the user (the prompt agent asks about another program's item), each
/// read on a thread of its own so that the provider goes on answering every other connection meanwhile. A
/// connection's later calls wait behind its read, in order: the serving thread keeps them, and the worker thread
/// leaves them alone, until the serving thread has answered them (``release(_:)``).
final class AskingConnections: Sendable {
    private struct State {
        /// Connections with a read under way.
        var asking: Set<String> = []
        /// Connections whose later calls must wait: a read under way, or finished with its kept calls not yet all
        /// answered.
        var busy: Set<String> = []
        /// Connections whose read finished, to be released by the serving thread.
        var finished: [String] = []
    }

    private let state = Mutex(State())
    /// The most reads waiting for the user at once; past it, a read that would ask is refused.
    static let limit = 16

    /// Whether `connection`'s calls must wait (its read waits, or its later calls were not answered yet).
    func isBusy(_ connection: String) -> Bool {
        state.withLock { $0.busy.contains(connection) }
    }

    /// Whether `connection` has a read under way.
    func isAsking(_ connection: String) -> Bool {
        state.withLock { $0.asking.contains(connection) }
    }

    /// Marks `connection` busy for a read that will ask; false when too many already wait.
    func begin(_ connection: String) -> Bool {
        state.withLock { state in
            guard state.asking.count < Self.limit else { return false }
            state.asking.insert(connection)
            state.busy.insert(connection)
            return true
        }
    }

    /// On the read's thread: its answer was sent. The connection stays busy until ``release(_:)``.
    func finish(_ connection: String) {
        state.withLock { state in
            state.asking.remove(connection)
            state.finished.append(connection)
        }
    }

    /// The connections whose read finished since the last call, in the order they finished; each stays busy until
    /// ``release(_:)``.
    func takeFinished() -> [String] {
        state.withLock { state in
            defer { state.finished.removeAll() }
            return state.finished
        }
    }

    /// `connection`'s calls may be answered as they come again (its kept calls were).
    func release(_ connection: String) {
        _ = state.withLock { $0.busy.remove(connection) }
    }
}
