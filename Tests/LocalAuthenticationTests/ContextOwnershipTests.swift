import Authenticators
import Foundation
import SecurityProtocol
import KeychainServices
@testable import LocalAuthentication
import SecurityClient
import SecurityServer
import Testing
import TestSupport

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
            try KeychainClientSelection.$current.withValue(other) {
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
        transient = nil
        #expect(throws: AuthenticationError.self) { _ = try world.contexts.credentials(for: id) }
        await world.close()
    }
}
