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
    /// Whether every message passes through the protocol's codec (``EmbeddedConfiguration/roundTripsMessages``).
    package let roundTripsMessages: Bool

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
        roundTripsMessages = configuration.roundTripsMessages
    }

    /// The process's default client: the store, PAM service, readers and access groups the environment names
    /// (`EmbeddedConfiguration.fromEnvironment()`, `AuthenticationConfiguration.fromEnvironment`), prompting on
    /// the terminal when there is one.
    ///
    /// - Throws: `KeychainStatus` when the store cannot be opened.
    package static func fromEnvironment() throws -> EmbeddedClient {
        let configuration = EmbeddedConfiguration.fromEnvironment()
        return try EmbeddedClient(
            configuration: configuration,
            authentication: .fromEnvironment(
                dataDirectory: configuration.dataDirectory, presenter: AuthenticationConfiguration.defaultPresenter()))
    }

    /// A client for another caller of the same engine (same store, same keys, same event stream).
    package init(
        engine: KeychainEngine, caller: CallerIdentity,
        roundTripsMessages: Bool = EmbeddedConfiguration.roundTripsMessagesByDefault
    ) {
        self.engine = engine
        self.caller = caller
        self.roundTripsMessages = roundTripsMessages
    }

    /// The connection ends with the client: its authentication contexts end too.
    deinit {
        engine.authentication?.discardAll(owner: caller.connection)
    }

    package func send(_ request: KeychainRequest) throws -> KeychainResponse {
        guard roundTripsMessages else { return try engine.handle(request, caller: caller) }
        return try MessageRoundTrip.result { try engine.handle(MessageRoundTrip.value(request), caller: caller) }
    }

    package func send(_ request: KeyRequest) throws -> KeyResponse {
        guard roundTripsMessages else { return try engine.handle(request, caller: caller) }
        return try MessageRoundTrip.result { try engine.handle(MessageRoundTrip.value(request), caller: caller) }
    }

    package func send(_ request: AuthenticationRequest) async throws -> AuthenticationResponse {
        guard roundTripsMessages else { return try await engine.handle(request, caller: caller) }
        return try await MessageRoundTrip.result {
            try await engine.handle(request.roundTrippingPayloads(), caller: caller)
        }
    }

    package func send(
        _ request: AdministrationRequest, progress: @escaping @Sendable (AdministrationEvent) -> Void
    ) async throws -> AdministrationEvent {
        guard roundTripsMessages else { return try await engine.handle(request, caller: caller, progress: progress) }
        return try await MessageRoundTrip.result {
            try await engine.handle(MessageRoundTrip.value(request), caller: caller) {
                progress(MessageRoundTrip.value($0))
            }
        }
    }

    package func keychainEvents() -> AsyncStream<EngineEvent> {
        let events = engine.events(for: caller)
        return roundTripsMessages ? MessageRoundTrip.stream(events) : events
    }

    package func environmentChanges() -> AsyncStream<EnvironmentSnapshot> {
        guard let contexts = engine.authentication else { return AsyncStream { $0.finish() } }
        let changes = contexts.environmentChanges(for: caller)
        return roundTripsMessages ? MessageRoundTrip.stream(changes) : changes
    }
}
