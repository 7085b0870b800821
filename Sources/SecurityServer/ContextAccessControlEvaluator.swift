import Authenticators
import Foundation
import SecurityProtocol
import WorkThreads

/// The access-control evaluator when authentication contexts exist: a list is satisfied by the credentials of the
/// caller's context (`kSecUseAuthenticationContext`); when they fall short and interaction is allowed, it prompts
/// through the request's channel to its client and records the new credential in that context.
///
/// `SecItem` calls are synchronous, so a prompt blocks the calling thread, as Apple's does.
package struct ContextAccessControlEvaluator: AccessControlEvaluator {
    /// The contexts whose credentials count.
    package let contexts: AuthenticationContexts

    /// An evaluator over `contexts`.
    package init(contexts: AuthenticationContexts) {
        self.contexts = contexts
    }

    package func authorize(
        _ policy: AccessControlPolicy, operation: AccessControlOperation, authenticationUI: AuthenticationUI,
        context: AuthenticationContextID?, prompting: Prompting
    ) -> AccessDecision {
        let requirement = AccessRequirement(policy, operation: operation)
        let contexts = self.contexts
        do {
            // Every private-key operation comes through here: read the enrolled set only when the list depends on it.
            let currentHash = requirement.dependsOnEnrolledSet ? try contexts.currentStateHash() : nil
            var credentials = try context.map { try contexts.credentials(for: $0) } ?? []
            var hasPassword =
                try requirement.needsApplicationPassword
                ? context.map { try contexts.applicationPassword(for: $0) != nil } ?? false : true
            if requirement.isSatisfied(by: credentials, currentHash: currentHash) && hasPassword { return .allowed }
            guard requirement.isSatisfiable(currentHash: currentHash) else {
                return .denied(.authFailed)
            }
            switch authenticationUI {
            case .skip: return .skip
            case .fail: return .denied(.interactionNotAllowed)
            case .allow: break
            }
            guard !prompting.options.interactionNotAllowed, let channel = prompting.channel, !channel.isClosed else {
                return .denied(.interactionNotAllowed)
            }
            if !hasPassword && context == nil { return .denied(.interactionNotAllowed) }
            let prompt = prompting.options.prompt.withDefaultReason("use a protected keychain item")
            let target = try context ?? contexts.createContext()
            defer { if context == nil { contexts.discard(target) } }
            let needsPassword = !hasPassword
            try BlockingBridge.wait {
                try await contexts.satisfy(
                    requirement, context: target, prompts: channel, prompt: prompt, needsPassword: needsPassword)
            }
            credentials = try contexts.credentials(for: target)
            hasPassword = try !requirement.needsApplicationPassword || contexts.applicationPassword(for: target) != nil
            let satisfied = requirement.isSatisfied(
                by: credentials, currentHash: requirement.dependsOnEnrolledSet ? try contexts.currentStateHash() : nil)
            return satisfied && hasPassword ? .allowed : .denied(.authFailed)
        } catch let error as AuthenticationError {
            return .denied(KeychainStatus.Code(authenticationCode: error.code))
        } catch {
            return .denied(.authFailed)
        }
    }
}

extension AuthenticationContexts {
    /// Runs the evaluations `requirement`'s unmet constraints call for in context `id` (and asks for the
    /// application password when `needsPassword`), recording the credentials.
    func satisfy(
        _ requirement: AccessRequirement, context id: AuthenticationContextID, prompts: PromptChannel,
        prompt: EvaluationPrompt, needsPassword: Bool
    ) async throws {
        try Self.requireShowable(prompt)
        let unmet = requirement.unmet(by: try credentials(for: id), currentHash: try currentStateHash())
        for policy in requirement.evaluations(for: unmet) {
            try await evaluate(policy, context: id, options: EvaluationOptions(prompt: prompt), prompts: prompts)
        }
        if needsPassword {
            let question = PasscodePrompt(text: "Application password: ", echo: false)
            let password = try await PasscodeAuthenticator.transactions.run(
                for: PasscodeAuthenticator.TransactionKey.question(configuration.username)
            ) {
                prompts.ask(prompt, question: question, isApplicationPassword: true) { self.isInvalidated(id) }
            }
            guard let password else { throw AuthenticationError(.userCancel, "the application password was not given") }
            try setApplicationPassword(password, for: id)
        }
    }

    /// `LAContext.evaluateAccessControl`: prompts as needed until context `id` holds credentials that satisfy
    /// `policy` for `operation`.
    ///
    /// - Throws: `AuthenticationError`: `authenticationFailed` when the list can never be satisfied (its enrolled
    ///   set changed), `notInteractive`, and whatever the evaluations throw.
    package func evaluateAccessControl(
        _ policy: AccessControlPolicy, operation: AccessControlOperation, context id: AuthenticationContextID,
        options: EvaluationOptions, prompts: PromptChannel?
    ) async throws {
        let requirement = AccessRequirement(policy, operation: operation)
        let currentHash = try currentStateHash()
        if requirement.isSatisfied(by: try credentials(for: id), currentHash: currentHash) { return }
        guard requirement.isSatisfiable(currentHash: currentHash) else {
            throw AuthenticationError(
                .authenticationFailed,
                "the access control can no longer be satisfied: the enrolled fingerprints changed since it was made")
        }
        guard !options.interactionNotAllowed, prompts != nil else {
            throw AuthenticationError(.notInteractive, "an authentication is needed and interaction is not allowed")
        }
        let unmet = requirement.unmet(by: try credentials(for: id), currentHash: currentHash)
        for step in requirement.evaluations(for: unmet) {
            var stepOptions = options
            // The reuse window is for device unlock, never for an access-control list (Apple's LAContext docs).
            stepOptions.reuseDuration = 0
            try await evaluate(step, context: id, options: stepOptions, prompts: prompts)
        }
        guard requirement.isSatisfied(by: try credentials(for: id), currentHash: try currentStateHash()) else {
            throw AuthenticationError(.authenticationFailed, "the credential does not satisfy the access control")
        }
    }
}
