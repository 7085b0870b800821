import Foundation
import LocalAuthentication
import LocalAuthenticationCombine
import SwiftKeychain
import Synchronization
import TestSupport
import Testing

/// Issue "Apple compatibility measured on real code", item 6: Combine as Apple code uses it beside async
/// sequences — `NotificationCenter.default.publisher(for:object:)` (Foundation's Combine extension, here through
/// OpenCombineFoundation), a right's state changes and the keychain's events as publishers.
@Suite("Combine publishers of rights and keychain events", .serialized, .virtualReaderLock)
struct CombineTests {
    final class Collected<Value: Sendable>: Sendable {
        let values = Mutex<[Value]>([])
        func append(_ value: Value) { values.withLock { $0.append(value) } }
        var all: [Value] { values.withLock { $0 } }

        func wait(for count: Int) async -> [Value] {
            for _ in 0..<250 where all.count < count { try? await Task.sleep(for: .milliseconds(20)) }
            return all
        }
    }

    @Test func aRightsTransitionsArePublished() async throws {
        let world = try RightsWorld()
        try await world.run {
            let right = LARight()
            right.presenter = ScriptedAuthenticationPresenter(
                fingerprintSteps: [.fallback, .fallback], passcodes: ["secret", "secret"])
            let notifications = Collected<String>()
            let states = Collected<LARight.State>()
            var cancellables = Set<AnyCancellable>()
            NotificationCenter.default.publisher(for: LARight.didBecomeAuthorizedNotification, object: right)
                .sink { _ in notifications.append("authorized") }
                .store(in: &cancellables)
            NotificationCenter.default.publisher(for: LARight.didBecomeUnauthorizedNotification, object: right)
                .sink { _ in notifications.append("unauthorized") }
                .store(in: &cancellables)
            right.statePublisher.sink { states.append($0) }.store(in: &cancellables)

            try await right.authorize(localizedReason: "Show the account")
            await right.deauthorize()
            #expect(await states.wait(for: 3) == [.authorizing, .authorized, .notAuthorized])
            #expect(notifications.all == ["authorized", "unauthorized"])

            // A cancelled subscription hears nothing more.
            cancellables.removeAll()
            try await right.authorize(localizedReason: "Again")
            try await Task.sleep(for: .milliseconds(100))
            #expect(states.all.count == 3)
            #expect(notifications.all.count == 2)
        }
        await world.close()
    }

    @Test func keychainEventsArePublishedInOrder() async throws {
        let world = try RightsWorld()
        let keychain = Keychain(client: world.client)
        let events = Collected<KeychainEvent.Kind>()
        let subscription = try keychain.eventsPublisher().sink { events.append($0.kind) }
        try keychain.add(GenericPassword(service: "combine", account: "a", password: Data("p".utf8)))
        try keychain.delete(.genericPasswords(service: "combine"))
        #expect(await events.wait(for: 2) == [.added, .deleted])
        subscription.cancel()
        await world.close()
    }
}
