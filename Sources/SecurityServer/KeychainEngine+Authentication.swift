import Foundation
import SecureCrypto
import SecurityProtocol

extension KeychainEngine {
    /// Serves one authentication request, asking the user through `prompts` (the request's channel to its client;
    /// nil: nobody can be asked).
    ///
    /// - Throws: `AuthenticationError` with `LAError` codes; `invalidContext` when this engine has no authenticators.
    package func handle(
        _ request: AuthenticationRequest, caller: CallerIdentity, prompts: PromptChannel? = nil
    ) async throws -> AuthenticationResponse {
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
        case .evaluatePolicy(let policy, let id, let options):
            return .credential(try await contexts.evaluate(policy, context: id, options: options, prompts: prompts))
        case .canEvaluatePolicy(let policy, let id):
            return .availability(await contexts.canEvaluate(policy, context: id))
        case .evaluateAccessControl(let policy, let operation, let id, let options):
            try await contexts.evaluateAccessControl(
                policy, operation: operation, context: id, options: options, prompts: prompts)
            return .success
        case .setApplicationPassword(let password, let id):
            try contexts.setApplicationPassword(password, for: id)
            return .success
        case .isApplicationPasswordSet(let id):
            return .flag(try contexts.applicationPassword(for: id) != nil)
        case .biometryState:
            return .biometryState(
                readerPresent: await contexts.isReaderPresent(), stateHash: try contexts.currentStateHash())
        case .evaluatedDomainState(let id):
            return .domainState(
                try contexts.evaluatedDomainState(for: id).map { EnvironmentSnapshot.applicationHash($0, caller) })
        case .environment:
            return .environment(await contexts.environment().forApplication(caller))
        case .unlockWithPasscode(let options):
            let id = try contexts.createContext(unlocksKeychain: true)
            defer { contexts.discard(id) }
            // The passcode-success handler unlocks the classes (re-sealing them after a passcode change) and
            // reports it.
            try await contexts.evaluate(.passcode, context: id, options: options, prompts: prompts)
            if let failure = contexts.keychainUnlockFailure(in: id) ?? (enclave.isLocked ? "it is still locked" : nil) {
                throw AuthenticationError(
                    .authenticationFailed, "PAM accepted the passcode, but the keychain did not open: \(failure)")
            }
            return .success
        case .unlockWithBiometry(let options):
            try await unlockWithFingerprint(contexts, options: options, prompts: prompts)
            return .success
        }
    }
}
