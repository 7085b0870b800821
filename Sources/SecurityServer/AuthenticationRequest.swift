import Foundation
import SecureCrypto
import SecurityProtocol

/// A request about authentication contexts: what `LAContext` and `lactl` ask the engine.
package enum AuthenticationRequest: Sendable {
    /// A new context (answer: `.context`).
    case createContext
    /// Invalidate a context (in-flight evaluations end with `appCancel`).
    case invalidate(AuthenticationContextID)
    /// Forget a context (its `LAContext` is gone).
    case discard(AuthenticationContextID)
    /// Record the presenter, reason and interaction rule keychain prompts for this context use.
    case configure(
        AuthenticationContextID, presenter: (any EvaluationPresenter)?, reason: String?, interactionNotAllowed: Bool)
    /// Evaluate a policy (answer: `.credential`).
    case evaluatePolicy(EvaluationPolicy, AuthenticationContextID, EvaluationOptions)
    /// Check a policy without prompting (answer: `.availability`).
    case canEvaluatePolicy(EvaluationPolicy, AuthenticationContextID)
    /// Authenticate until the context satisfies an access-control list for an operation.
    case evaluateAccessControl(AccessControlPolicy, AccessControlOperation, AuthenticationContextID, EvaluationOptions)
    /// Set or remove the context's application password.
    case setApplicationPassword(SecureBytes?, AuthenticationContextID)
    /// Whether the context has an application password (answer: `.flag`).
    case isApplicationPasswordSet(AuthenticationContextID)
    /// Whether a reader is present and the global enrolled-set hash (answer: `.biometryState`): for the engine's
    /// own bindings (persisted rights), never shown to an application as such.
    case biometryState
    /// The hash the context's last biometric success or check saw, derived for the caller's application (answer:
    /// `.domainState`).
    case evaluatedDomainState(AuthenticationContextID)
    /// The user's authentication mechanisms now, the state hash derived for the caller's application (answer:
    /// `.environment`).
    case environment
    /// Ask for the passcode through PAM and, on success, unlock the keychain's classes: the only way to unlock. The
    /// options' presenter asks (the engine's configured presenter when it is nil).
    case unlockWithPasscode(EvaluationOptions)
}

extension AuthenticationRequest {
    /// The context the request names, whose owner must be the calling connection.
    var contextID: AuthenticationContextID? {
        switch self {
        case .invalidate(let id), .discard(let id), .configure(let id, _, _, _), .evaluatePolicy(_, let id, _),
            .canEvaluatePolicy(_, let id), .evaluateAccessControl(_, _, let id, _), .setApplicationPassword(_, let id),
            .isApplicationPasswordSet(let id), .evaluatedDomainState(let id):
            return id
        case .createContext, .biometryState, .environment, .unlockWithPasscode:
            return nil
        }
    }
}

/// The engine's answer to an ``AuthenticationRequest``.
package enum AuthenticationResponse: Sendable {
    case success
    case context(AuthenticationContextID)
    case credential(Credential)
    case availability(PolicyAvailability)
    case flag(Bool)
    case biometryState(readerPresent: Bool, stateHash: Data?)
    case domainState(Data?)
    case environment(EnvironmentSnapshot)
}

extension KeychainEngine {
    /// Serves one authentication request.
    ///
    /// - Throws: `AuthenticationError` with `LAError` codes; `invalidContext` when this engine has no authenticators.
    package func handle(_ request: AuthenticationRequest, caller: CallerIdentity) async throws -> AuthenticationResponse {
        guard let contexts = authentication else {
            throw AuthenticationError(.invalidContext, "this keychain engine was opened without authenticators")
        }
        if let id = request.contextID { try contexts.requireOwner(id, connection: caller.connection) }
        switch request {
        case .createContext:
            return .context(try contexts.createContext(owner: caller.connection))
        case .invalidate(let id):
            contexts.invalidate(id)
            return .success
        case .discard(let id):
            contexts.discard(id)
            return .success
        case .configure(let id, let presenter, let reason, let interactionNotAllowed):
            try contexts.configure(id, presenter: presenter, reason: reason, interactionNotAllowed: interactionNotAllowed)
            return .success
        case .evaluatePolicy(let policy, let id, let options):
            return .credential(try await contexts.evaluate(policy, context: id, options: options))
        case .canEvaluatePolicy(let policy, let id):
            return .availability(await contexts.canEvaluate(policy, context: id))
        case .evaluateAccessControl(let policy, let operation, let id, let options):
            try await contexts.evaluateAccessControl(policy, operation: operation, context: id, options: options)
            return .success
        case .setApplicationPassword(let password, let id):
            try contexts.setApplicationPassword(password, for: id)
            return .success
        case .isApplicationPasswordSet(let id):
            return .flag(try contexts.applicationPassword(for: id) != nil)
        case .biometryState:
            return .biometryState(readerPresent: await contexts.isReaderPresent(), stateHash: try contexts.currentStateHash())
        case .evaluatedDomainState(let id):
            return .domainState(
                try contexts.evaluatedDomainState(for: id).map { EnvironmentSnapshot.applicationHash($0, caller) })
        case .environment:
            return .environment(await contexts.environment().forApplication(caller))
        case .unlockWithPasscode(var options):
            options.presenter = options.presenter ?? contexts.configuration.presenter
            let id = try contexts.createContext()
            defer { contexts.discard(id) }
            // The passcode-success handler unlocks the classes and reports it.
            try await contexts.evaluate(.passcode, context: id, options: options)
            return .success
        }
    }
}
