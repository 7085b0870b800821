import CGio
import CSecretBus
import Synchronization

/// The signals the provider sends from threads other than its own (GDBus's emission may be called from any
/// thread): the persisted collections' lock changes, and prompts completing.
struct Signals: @unchecked Sendable {
    // @unchecked: la_secret_bus_emit may be called from any thread. The bus lives as long as the provider, which
    // lives until lactl secret-service ends; a prompt still running then ends with the process.
    let bus: OpaquePointer

    /// The keychain locked (`locked`) or unlocked: the `Locked` of every persisted collection (by name) changed.
    func lockChanged(_ locked: Bool, collections: [String]) {
        for collection in collections {
            let path = SecretServiceProvider.path(of: collection)
            emit(
                path, SecretServiceProvider.propertiesInterface, "PropertiesChanged",
                [
                    .string(SecretServiceProvider.collectionInterface),
                    .dictionary(keyType: "s", valueType: "v", [.string("Locked")], [.variant(.boolean(locked))]),
                    .array(elementType: "s", []),
                ])
            emit(
                SecretServiceProvider.root, SecretServiceProvider.serviceInterface, "CollectionChanged",
                [.objectPath(path)])
        }
    }

    /// Prompt `path` completed: `Completed(dismissed, objects)`.
    func completed(_ path: String, dismissed: Bool, objects: [String]) {
        emit(
            path, SecretServiceProvider.promptInterface, "Completed",
            [.boolean(dismissed), .variant(.paths(dismissed ? [] : objects))])
    }

    /// Signal `member` of `interface` from `path`, with `body`'s members.
    func emit(_ path: String, _ interface: String, _ member: String, _ body: [BusValue]) {
        la_secret_bus_emit(bus, path, interface, member, BusValue.tuple(body).gvariant())
    }
}

/// The unlock prompts handed out by `Unlock`: each belongs to the connection it was handed to, runs once when that
/// connection calls `Prompt`, and ends with `Completed` (or at `Dismiss`).
final class PromptTable: Sendable {
    private struct Entry {
        var owner: String
        var objects: [String]
        var number: Int
        var task: Task<Void, Never>?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var next = 1
    }

    private let state = Mutex(State())
    /// The most prompts kept at once: past it the oldest one never called goes (clients that ask to unlock and
    /// never prompt), and with every kept one running, a new one is refused.
    static let limit = 256

    /// A new prompt for `objects` under `prefix`, owned by connection `owner`; nil when too many run.
    func add(owner: String, objects: [String], under prefix: String) -> String? {
        state.withLock { state in
            if state.entries.count >= Self.limit {
                guard
                    let oldest = state.entries.filter({ $0.value.task == nil })
                        .min(by: { $0.value.number < $1.value.number })
                else { return nil }
                state.entries[oldest.key] = nil
            }
            let path = prefix + "u\(state.next)"
            state.entries[path] = Entry(owner: owner, objects: objects, number: state.next)
            state.next += 1
            return path
        }
    }

    /// The connection prompt `path` belongs to; nil when there is no such prompt (any more).
    func owner(of path: String) -> String? {
        state.withLock { $0.entries[path]?.owner }
    }

    /// Runs `unlock` for prompt `path` unless it runs already; when it returns, `Completed` tells whether the
    /// objects were unlocked (true) or the prompt was dismissed.
    func start(_ path: String, signals: Signals, _ unlock: @escaping @Sendable () async -> Bool) {
        state.withLock { state in
            guard var entry = state.entries[path], entry.task == nil else { return }
            entry.task = Task.detached { [self] in
                let unlocked = await unlock()
                // Gone when dismissed meanwhile: Completed was sent then.
                guard let done = self.state.withLock({ $0.entries.removeValue(forKey: path) }) else { return }
                signals.completed(path, dismissed: !unlocked, objects: done.objects)
            }
            state.entries[path] = entry
        }
    }

    /// `Dismiss`: the prompt ends dismissed (an unlock under way is cancelled).
    func dismiss(_ path: String, signals: Signals) {
        guard let entry = state.withLock({ $0.entries.removeValue(forKey: path) }) else { return }
        entry.task?.cancel()
        signals.completed(path, dismissed: true, objects: [])
    }
}

/// Names shared between the serving thread, which lists them, and the keychain watch's thread, which signals for
/// them.
final class SharedNames: Sendable {
    private let names: Mutex<[String]>

    init(_ names: [String]) { self.names = Mutex(names) }

    func get() -> [String] { names.withLock { $0 } }
    func set(_ new: [String]) { names.withLock { $0 = new } }
}
