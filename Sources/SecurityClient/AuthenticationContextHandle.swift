import SecurityProtocol

/// An object that stands for an engine-side authentication context: `LAContext`, as passed in
/// `kSecUseAuthenticationContext`. The keychain functions ask it for the handle to send with a request, and for
/// how that request's prompts ask the user.
package protocol AuthenticationContextHandle: AnyObject, Sendable {
    /// The context's handle, creating the engine-side context on first use.
    ///
    /// - Throws: `AuthenticationError` (`invalidContext`) when the context cannot be created or was invalidated.
    func authenticationContextID() throws -> AuthenticationContextID

    /// The prompt settings of a keychain or key request naming this context: its reason, titles and interaction
    /// rule (`localizedReason`, `interactionNotAllowed`).
    var keychainPromptOptions: EvaluationOptions { get }

    /// Who draws the prompts of a keychain or key request naming this context (nil: nobody).
    var keychainPresenter: (any EvaluationPresenter)? { get }
}

extension SecurityClient {
    /// Serves a keychain request for a synchronous edge, prompting as `context` says (the client's defaults
    /// without one).
    /// The request is made on behalf of ``KeychainSubject/current`` when one is set.
    package func sendBlocking(
        _ request: KeychainRequest, context: (any AuthenticationContextHandle)?
    ) throws -> KeychainResponse {
        if let subject = KeychainSubject.current {
            var options = context?.keychainPromptOptions ?? .keychainDefault
            options.subject = subject
            return try sendBlocking(
                request, options: options, presenter: context?.keychainPresenter ?? defaultPresenter)
        }
        guard let context else { return try sendBlocking(request) }
        return try sendBlocking(request, options: context.keychainPromptOptions, presenter: context.keychainPresenter)
    }

    /// Serves a key request for a synchronous edge, prompting as `context` says (the client's defaults without one).
    package func sendBlocking(_ request: KeyRequest, context: (any AuthenticationContextHandle)?) throws -> KeyResponse
    {
        guard let context else { return try sendBlocking(request) }
        return try sendBlocking(request, options: context.keychainPromptOptions, presenter: context.keychainPresenter)
    }
}
