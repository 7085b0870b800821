import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

extension EnvironmentSnapshot {
    /// The snapshot as `caller` may see it: its state hash derived for the caller's application.
    package func forApplication(_ caller: CallerIdentity) -> EnvironmentSnapshot {
        var copy = self
        copy.stateHash = stateHash.map { Self.applicationHash($0, caller) }
        return copy
    }

    /// The enrolled-set hash an application sees: HMAC-SHA256 keyed by the global hash over the application's
    /// identity (its first access group), so two applications see unrelated values for the same set and cannot use
    /// them to recognise the user across apps, as Apple's per-app `stateHash` does; each changes with the set.
    package static func applicationHash(_ hash: Data, _ caller: CallerIdentity) -> Data {
        HMACSHA256.Key(SecureBytes(hash)).authenticationCode(
            for: Data("la.domain-state.v1:".utf8) + Data((caller.accessGroups.first ?? "").utf8))
    }
}

/// The engine's view of the environment and the subscribers told when it changes.
///
/// Changes are noticed where they happen (an evaluation's end, an enrollment change, a lockout or its end, a
/// passcode success, a reader that disconnects mid-scan or answers again); each such moment re-reads the state and
/// tells subscribers when it differs from the last one told.
final class EnvironmentMonitor: Sendable {
    private struct State {
        var last: EnvironmentSnapshot?
        /// The ticket of the change `last` answers; a snapshot read for an earlier change is stale.
        var lastTicket: UInt64 = 0
        var nextTicket: UInt64 = 0
        var readerDisconnected = false
        var subscribers:
            [UInt64: (caller: CallerIdentity, continuation: AsyncStream<EnvironmentSnapshot>.Continuation)] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A stream of `caller`'s snapshots, from the next change on.
    func subscribe(_ caller: CallerIdentity) -> AsyncStream<EnvironmentSnapshot> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: EnvironmentSnapshot.self, bufferingPolicy: .bufferingNewest(64))
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.subscribers[state.nextID] = (caller, continuation)
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Records that the reader went away mid-operation (it counts as absent until it answers again).
    func noteDisconnected(_ disconnected: Bool) {
        state.withLock { $0.readerDisconnected = disconnected }
    }

    var readerDisconnected: Bool { state.withLock { $0.readerDisconnected } }

    /// Whether anyone listens (nothing is re-read for nobody).
    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    /// A ticket for a change about to be read; snapshots are published in ticket order.
    func ticket() -> UInt64 {
        state.withLock { state in
            state.nextTicket += 1
            return state.nextTicket
        }
    }

    /// Tells subscribers about `snapshot` (read for the change `ticket` stands for) when it differs from the last one
    /// told and no later change was told already: the reads run concurrently and may finish out of order.
    func publish(_ snapshot: EnvironmentSnapshot, ticket: UInt64) {
        let targets = state.withLock { state -> [(CallerIdentity, AsyncStream<EnvironmentSnapshot>.Continuation)] in
            guard ticket > state.lastTicket else { return [] }
            state.lastTicket = ticket
            guard state.last != snapshot else { return [] }
            state.last = snapshot
            return state.subscribers.values.map { ($0.caller, $0.continuation) }
        }
        for (caller, continuation) in targets { continuation.yield(snapshot.forApplication(caller)) }
    }
}

extension AuthenticationContexts {
    /// The environment now: reader presence (asked of libfprint; a reader that disconnected mid-operation counts as
    /// absent until the next evaluation or enrollment ends), enrollment, lockout, the global state hash, and whether
    /// PAM can check the user's passcode.
    package func environment() async -> EnvironmentSnapshot {
        let present = environmentMonitor.readerDisconnected ? false : await isReaderPresent()
        let enrolled = (try? biometric.enrolledPrints().isEmpty == false) ?? false
        let lockedOut = (try? attemptPolicy.currentState().biometryLocked) ?? true
        let passcodeSet = (try? await isPasscodeUsable()) ?? false
        return EnvironmentSnapshot(
            readerPresent: present, enrolled: enrolled, lockedOut: lockedOut,
            stateHash: try? currentStateHash(), passcodeSet: passcodeSet)
    }

    /// Snapshots for `caller`, from the next change on.
    package func environmentChanges(for caller: CallerIdentity) -> AsyncStream<EnvironmentSnapshot> {
        environmentMonitor.subscribe(caller)
    }

    /// Re-reads the environment after something that may have changed it and tells subscribers if it did.
    func environmentMayHaveChanged(readerDisconnected: Bool = false) {
        environmentMonitor.noteDisconnected(readerDisconnected)
        // Re-reading asks the reader and PAM: only worth it when someone listens.
        guard environmentMonitor.hasSubscribers else { return }
        let ticket = environmentMonitor.ticket()
        Task {
            environmentMonitor.publish(await environment(), ticket: ticket)
        }
    }
}
