import Foundation
import SecurityProtocol
import Synchronization

/// Fans engine events out to every subscriber whose access groups cover the item.
final class EngineEventHub: Sendable {
    private struct Subscriber {
        var caller: CallerIdentity
        var continuation: AsyncStream<EngineEvent>.Continuation
    }

    private let subscribers = Mutex<[UInt64: Subscriber]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// A stream of the events `caller` may see, from now until the stream is dropped.
    func subscribe(_ caller: CallerIdentity) -> AsyncStream<EngineEvent> {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(
            of: EngineEvent.self, bufferingPolicy: .bufferingNewest(4096))
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = Subscriber(caller: caller, continuation: continuation) }
        return stream
    }

    func emit(_ events: [EngineEvent]) {
        guard !events.isEmpty else { return }
        let targets = subscribers.withLock { Array($0.values) }
        for subscriber in targets {
            for event in events where event.accessGroup.map(subscriber.caller.mayAccess) ?? true {
                subscriber.continuation.yield(event)
            }
        }
    }
}
