import Foundation
import LocalAuthentication
@_exported import OpenCombine
@_exported import OpenCombineFoundation
import SwiftKeychain

// Combine beside the async sequences, through OpenCombine (Combine's API for Linux), for code written for Apple
// platforms that subscribes with publishers. `import LocalAuthenticationCombine` in place of `import Combine`
// brings OpenCombine's Publisher, AnyCancellable, sink, PassthroughSubject… and Foundation's
// `NotificationCenter.default.publisher(for:object:)`, so
//
//     NotificationCenter.default.publisher(for: LARight.didBecomeAuthorizedNotification, object: right)
//         .sink { _ in … }
//
// compiles as on Apple platforms. The two publishers below are our additions (Apple's `LARight` is observed
// through KVO there, which Linux does not have); a separate product, so programs that do not use Combine do not
// build OpenCombine.

extension LARight {
    /// Every state change of this right from the moment of subscription, in order (`LARight.stateUpdates` as a
    /// publisher; not in Apple's API). It finishes when the right is released.
    public var statePublisher: AnyPublisher<LARight.State, Never> {
        AsyncSequencePublisher { [stateUpdates] in stateUpdates }.eraseToAnyPublisher()
    }
}

extension Keychain {
    /// The keychain's events (items added, updated or deleted in the caller's groups; lock and unlock) from the
    /// moment of subscription (`Keychain.events()` as a publisher; not in Apple's API).
    ///
    /// - Throws: `KeychainError` when the keychain cannot be opened.
    public func eventsPublisher() throws -> AnyPublisher<KeychainEvent, Never> {
        let events = try self.events()
        return AsyncSequencePublisher { events }.eraseToAnyPublisher()
    }
}

/// A publisher of the elements of an async sequence that never fails, iterated from the moment a subscriber
/// attaches (so nothing sent before the subscription is lost) until the subscriber cancels. Elements arriving while
/// the subscriber has no demand are dropped, as a `PassthroughSubject` drops them (`sink` always has demand).
struct AsyncSequencePublisher<Elements: AsyncSequence & Sendable>: Publisher where Elements.Element: Sendable {
    typealias Output = Elements.Element
    typealias Failure = Never

    let make: @Sendable () -> Elements

    init(_ make: @escaping @Sendable () -> Elements) { self.make = make }

    func receive<Downstream: Subscriber>(subscriber: Downstream)
    where Downstream.Input == Output, Downstream.Failure == Never {
        // OpenCombine's subjects serialize sends with their own lock (not marked Sendable); only the iteration task
        // sends to this one.
        nonisolated(unsafe) let subject = PassthroughSubject<Output, Never>()
        let iteration = Iteration()
        let elements = make()
        subject.handleEvents(
            receiveSubscription: { _ in
                iteration.start {
                    do {
                        for try await element in elements { subject.send(element) }
                    } catch {}
                    subject.send(completion: .finished)
                }
            },
            receiveCancel: { iteration.cancel() }
        ).receive(subscriber: subscriber)
    }
}

/// The task iterating one subscription's sequence.
// Safe to share: `task` is only read and written under `lock`.
private final class Iteration: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<Void, Never>?

    func start(_ body: @escaping @Sendable () async -> Void) {
        lock.withLock { task = Task { await body() } }
    }

    func cancel() {
        lock.withLock { task?.cancel() }
    }
}
