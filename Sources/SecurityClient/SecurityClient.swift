import Foundation
import SecurityProtocol
import WorkThreads

/// Sends requests to the engine and returns its answers: in-process (`EmbeddedClient`) or to `localauthd` over its
/// socket and its lane (`SocketClient`). Both public APIs (SecItem dictionaries and the typed Swift API) go through
/// this.
///
/// Requests are async; the `…Blocking` forms are for Apple's synchronous edges only (`SecItem*`, `SecKey*`, the
/// synchronous `LAContext` members), which block their own thread as Apple's do. A request that may need the user
/// names the presenter that draws its prompts: the engine sends ``PromptEvent``s, which reach that presenter on the
/// presenter queue, and its answers go back as ``PromptAnswer``s. A request made from a presenter callback is sent
/// with nobody to ask (see ``EvaluationPresenter``).
package protocol SecurityClient: Sendable {
    /// Who draws the prompts of keychain and key requests that come without an `LAContext` of their own: the
    /// terminal by default, or nobody.
    var defaultPresenter: (any EvaluationPresenter)? { get }

    /// Serves one keychain request, asking the user through `presenter` with `options` when an item's access
    /// control needs an authentication.
    ///
    /// - Throws: `KeychainStatus` carrying the `OSStatus` Keychain Services reports.
    func send(
        _ request: KeychainRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) async throws -> KeychainResponse

    /// ``send(_:options:presenter:)-(KeychainRequest,_,_)`` for a synchronous edge: blocks the calling thread
    /// until the engine answers.
    func sendBlocking(
        _ request: KeychainRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) throws -> KeychainResponse

    /// Serves one enclave-key request (generate, sign, decrypt, key exchange), asking the user through `presenter`
    /// when the key's access control needs an authentication.
    ///
    /// - Throws: `KeychainStatus` carrying the `OSStatus` the `SecKey` functions report.
    func send(
        _ request: KeyRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) async throws -> KeyResponse

    /// ``send(_:options:presenter:)-(KeyRequest,_,_)`` for a synchronous edge: blocks the calling thread until the
    /// engine answers.
    func sendBlocking(
        _ request: KeyRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) throws -> KeyResponse

    /// Serves one authentication-context request (`LAContext`): create, evaluate, check, invalidate, credentials.
    /// Suspends while a prompt is shown through `presenter` (nil: nobody can be asked).
    ///
    /// - Throws: `AuthenticationError` carrying the `LAError` code.
    func send(
        _ request: AuthenticationRequest, presenter: (any EvaluationPresenter)?
    ) async throws -> AuthenticationResponse

    /// Serves one administrative request (enrollment, the reader, the passcode's removal), calling `progress` with
    /// each progress event before it returns the answer.
    ///
    /// - Throws: `AuthenticationError` carrying the `LAError` code; `KeychainStatus` when the store fails.
    func send(
        _ request: AdministrationRequest, progress: @escaping @Sendable (AdministrationEvent) -> Void
    ) async throws -> AdministrationEvent

    /// Keychain events the caller may see, from now on.
    func keychainEvents() -> AsyncStream<EngineEvent>

    /// Where the keychain stands, for a cache of what it lists: equal to an earlier stamp only when nothing was
    /// committed to the store since, by any program, and the keychain's lock state is the same. Nil when this client
    /// cannot tell at once; ``keychainEvents()`` then tells, as the events arrive.
    func storeStamp() -> StoreStamp?

    /// The user's authentication environment each time it changes (state hash derived for this client's
    /// application), from now on.
    func environmentChanges() -> AsyncStream<EnvironmentSnapshot>
}

/// A ``SecurityClient/storeStamp()``: where the store's file and the keychain's lock stand.
package struct StoreStamp: Hashable, Sendable {
    /// Which file, and SQLite's count of the commits other connections made to it.
    package var file: UInt64
    package var version: Int64
    package var locked: Bool

    package init(file: UInt64, version: Int64, locked: Bool) {
        (self.file, self.version, self.locked) = (file, version, locked)
    }
}

extension SecurityClient {
    /// Serves one keychain request with no `LAContext`: the engine's default texts, the client's default presenter.
    package func send(_ request: KeychainRequest) async throws -> KeychainResponse {
        try await send(request, options: .keychainDefault, presenter: defaultPresenter)
    }

    /// ``send(_:)-(KeychainRequest)`` for a synchronous edge.
    package func sendBlocking(_ request: KeychainRequest) throws -> KeychainResponse {
        try sendBlocking(request, options: .keychainDefault, presenter: defaultPresenter)
    }

    /// Serves one key request with no `LAContext`: the engine's default texts, the client's default presenter.
    package func send(_ request: KeyRequest) async throws -> KeyResponse {
        try await send(request, options: .keychainDefault, presenter: defaultPresenter)
    }

    /// ``send(_:)-(KeyRequest)`` for a synchronous edge.
    package func sendBlocking(_ request: KeyRequest) throws -> KeyResponse {
        try sendBlocking(request, options: .keychainDefault, presenter: defaultPresenter)
    }

    /// Serves one authentication request that cannot prompt.
    package func send(_ request: AuthenticationRequest) async throws -> AuthenticationResponse {
        try await send(request, presenter: nil)
    }

    /// Serves one authentication request for a synchronous edge (`canEvaluatePolicy`, `invalidate()`), blocking the
    /// calling thread.
    package func sendBlocking(_ request: AuthenticationRequest) throws -> AuthenticationResponse {
        try BlockingBridge.wait { try await self.send(request, presenter: nil) }
    }

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
            .evaluatePolicy(.passcode, id, EvaluationOptions(prompt: EvaluationPrompt(reason: reason))),
            presenter: presenter)
        return id
    }
}
