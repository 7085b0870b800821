import Foundation
import SecurityProtocol
import SecurityServer

/// A client that runs the engine inside the calling process, on the store its configuration names.
///
/// Protects data at rest and gives Apple's semantics; it cannot keep keys from code running as the same user.
package final class EmbeddedClient: SecurityClient {
    /// The engine serving this client.
    package let engine: KeychainEngine
    /// Who this client's requests come from.
    package let caller: CallerIdentity

    /// Opens (creating on first use) the store `configuration` names, with authenticators configured by
    /// `authentication` (by default: state in the store directory, PAM and readers from the environment, no
    /// presenter for prompts the engine starts).
    ///
    /// - Throws: `KeychainStatus` when the store cannot be opened.
    package init(configuration: EmbeddedConfiguration, authentication: AuthenticationConfiguration? = nil) throws {
        let authentication =
            authentication
            ?? .fromEnvironment(dataDirectory: configuration.dataDirectory, presenter: nil)
        engine = try KeychainEngine(directory: configuration.dataDirectory, authentication: authentication)
        caller = CallerIdentity(
            accessGroups: configuration.accessGroups, mayAccessAllGroups: configuration.mayAccessAllGroups)
    }

    /// A client for another caller of the same engine (same store, same keys, same event stream).
    package init(engine: KeychainEngine, caller: CallerIdentity) {
        self.engine = engine
        self.caller = caller
    }

    /// The connection ends with the client: its authentication contexts end too.
    deinit {
        engine.authentication?.discardAll(owner: caller.connection)
    }

    package func send(_ request: KeychainRequest) throws -> KeychainResponse {
        try engine.handle(request, caller: caller)
    }

    package func send(_ request: KeyRequest) throws -> KeyResponse {
        try engine.handle(request, caller: caller)
    }

    package func send(_ request: AuthenticationRequest) async throws -> AuthenticationResponse {
        try await engine.handle(request, caller: caller)
    }

    package func send(
        _ request: AdministrationRequest, progress: @escaping @Sendable (AdministrationEvent) -> Void
    ) async throws -> AdministrationEvent {
        try await engine.handle(request, caller: caller, progress: progress)
    }

    package func keychainEvents() -> AsyncStream<EngineEvent> {
        engine.events(for: caller)
    }

    package func environmentChanges() -> AsyncStream<EnvironmentSnapshot> {
        guard let contexts = engine.authentication else { return AsyncStream { $0.finish() } }
        return contexts.environmentChanges(for: caller)
    }
}
