import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing

@testable import LocalAuthentication

/// Issue "One message protocol", item 3: a context belongs to the client connection that created it. Its id is not
/// a bearer token: another client of the same engine that learns it can neither use its credentials nor end it,
/// and the context ends when its own client goes away.
@Suite("Authentication contexts belong to their client", .serialized)
struct ContextOwnershipTests {
    @Test func anotherClientCanNeitherUseNorEndAContext() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let other = try world.engine.client(accessGroups: ["test.group"])
        try await world.run {
            #expect(addProtected("owned", flags: .devicePasscode) == errSecSuccess)
            let presenter = ScriptedAuthenticationPresenter(passcodes: ["secret"])
            let context = LAContext()
            context.presenter = presenter
            #expect(readProtected("owned", context: context).status == errSecSuccess)
            #expect(presenter.askedQuestions.count == 1)
            let id = try context.authenticationContextID()

            // The other client names the same context: refused, whatever it asks.
            KeychainClientSelection.$current.withValue(other) {
                #expect(readProtected("owned", context: context).status == errSecAuthFailed)
                #expect(throws: KeychainStatus.self) {
                    _ = try other.sendBlocking(.sign(handle: Data(), digest: Data(count: 32), context: id))
                }
            }
            for request: AuthenticationRequest in [
                .canEvaluatePolicy(.passcode, id), .isApplicationPasswordSet(id), .setApplicationPassword(nil, id),
                .evaluatedDomainState(id), .invalidate(id), .discard(id),
            ] {
                await #expect(throws: AuthenticationError.self) { _ = try await other.send(request) }
            }
            // Its owner still holds the credential: no second prompt.
            #expect(readProtected("owned", context: context).status == errSecSuccess)
            #expect(presenter.askedQuestions.count == 1)
        }
        await world.close()
    }

    /// An id naming no context (guessed, or of a context already gone) is refused like another client's, so a
    /// stranger's `invalidate` does nothing; an invalidated context stays its owner's and is refused to others.
    @Test func aStrangerCanEndNeitherAGoneNorAGuessedNorAnInvalidatedContext() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let other = try world.engine.client(accessGroups: ["test.group"])
        guard case .context(let gone) = try await world.client.send(.createContext),
            case .context(let invalidated) = try await world.client.send(.createContext)
        else {
            Issue.record("no context")
            return
        }
        _ = try await world.client.send(.discard(gone))
        let guessed = AuthenticationContextID(bytes: [UInt8](repeating: 0x5A, count: 32))
        for id in [gone, guessed] {
            await #expect(throws: AuthenticationError.self) { _ = try await other.send(.invalidate(id)) }
            await #expect(throws: AuthenticationError.self) { _ = try await other.send(.discard(id)) }
        }
        _ = try await world.client.send(.invalidate(invalidated))
        await #expect(throws: AuthenticationError.self) { _ = try await other.send(.discard(invalidated)) }
        await #expect(throws: AuthenticationError.self) {
            _ = try await world.client.send(.evaluatedDomainState(invalidated))
        }
        await world.close()
    }

    @Test(.embeddedOnly("reads the engine's context table, which only an embedded engine shows"))
    func aContextEndsWithItsClient() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        var transient: EmbeddedClient? = EmbeddedClient(
            engine: try #require(world.engine.embeddedEngine), caller: CallerIdentity(accessGroups: ["test.group"]))
        guard case .context(let id) = try await transient!.send(.createContext) else {
            Issue.record("no context")
            return
        }
        #expect(try world.contexts.credentials(for: id).isEmpty)
        // An invalidated context goes with its client too (it stayed behind, one record per invalidate, before).
        guard case .context(let invalidated) = try await transient!.send(.createContext) else {
            Issue.record("no context")
            return
        }
        _ = try await transient!.send(.invalidate(invalidated))
        let held = world.contexts.count
        transient = nil
        #expect(throws: AuthenticationError.self) { _ = try world.contexts.credentials(for: id) }
        #expect(world.contexts.count == held - 2)
        await world.close()
    }
}
