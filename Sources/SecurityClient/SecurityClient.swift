import Foundation
import SecurityProtocol
import SecurityServer

/// Sends requests to the engine and returns its answers: in-process (`EmbeddedClient`) or, later, over the
/// daemon's socket. Both public APIs (SecItem dictionaries and the typed Swift API) go through this.
package protocol SecurityClient: Sendable {
    /// Serves one keychain request. Blocks the calling thread until the engine answers.
    ///
    /// - Throws: `KeychainStatus` carrying the `OSStatus` Keychain Services reports.
    func send(_ request: KeychainRequest) throws -> KeychainResponse

    /// Serves one enclave-key request (generate, sign, decrypt, key exchange). Blocks until the engine answers.
    ///
    /// - Throws: `KeychainStatus` carrying the `OSStatus` the `SecKey` functions report.
    func send(_ request: KeyRequest) throws -> KeyResponse

    /// Serves one authentication-context request (`LAContext`): create, evaluate, check, invalidate, credentials.
    /// Suspends while a prompt is shown; the authenticators' blocking calls run on their own threads.
    ///
    /// - Throws: `AuthenticationError` carrying the `LAError` code.
    func send(_ request: AuthenticationRequest) async throws -> AuthenticationResponse

    /// Serves one administrative request (enrollment, the reader, the passcode's removal), calling `progress` with
    /// each progress event before it returns the answer.
    ///
    /// - Throws: `AuthenticationError` carrying the `LAError` code; `KeychainStatus` when the store fails.
    func send(
        _ request: AdministrationRequest, progress: @escaping @Sendable (AdministrationEvent) -> Void
    ) async throws -> AdministrationEvent

    /// Keychain events the caller may see, from now on.
    func keychainEvents() -> AsyncStream<EngineEvent>

    /// The user's authentication environment each time it changes (state hash derived for this client's
    /// application), from now on.
    func environmentChanges() -> AsyncStream<EnvironmentSnapshot>
}

extension SecurityClient {
    /// Serves one administrative request, ignoring its progress.
    package func send(_ request: AdministrationRequest) async throws -> AdministrationEvent {
        try await send(request) { _ in }
    }
}

extension SecurityClient {
    /// A new context of this client holding a passcode credential: what `presenter` answered, checked by PAM. What
    /// changing the enrolled fingerprints or removing the passcode needs.
    ///
    /// - Throws: `AuthenticationError` from the evaluation (`userCancel`, `authenticationFailed`, lockout waits).
    package func passcodeContext(
        reason: String, presenter: any EvaluationPresenter
    ) async throws -> AuthenticationContextID {
        guard case .context(let id) = try await send(.createContext) else {
            throw AuthenticationError(.invalidContext, "the engine created no context")
        }
        _ = try await send(
            .evaluatePolicy(.passcode, id, EvaluationOptions(prompt: EvaluationPrompt(reason: reason), presenter: presenter)))
        return id
    }
}
