import SecurityProtocol

/// What an access-control check decided for one item.
package enum AccessDecision: Sendable, Equatable {
    case allowed
    /// Leave the item out of the results (`kSecUseAuthenticationUISkip`).
    case skip
    case denied(KeychainStatus.Code)
}

/// Decides whether an item's `kSecAttrAccessControl` is satisfied for an operation.
///
/// The engine asks this for every item that carries an access-control list, before anything of the item's data is
/// decrypted. An evaluator that can check an `LAContext`'s credential (and prompt through the request's channel) replaces the
/// default when contexts exist.
package protocol AccessControlEvaluator: Sendable {
    /// - Parameters:
    ///   - context: the caller's `kSecUseAuthenticationContext`, when it gave one.
    ///   - prompting: how the request may ask the user.
    func authorize(
        _ policy: AccessControlPolicy, operation: AccessControlOperation, authenticationUI: AuthenticationUI,
        context: AuthenticationContextID?, prompting: Prompting
    ) -> AccessDecision
}

/// How one request may ask the user: its options (texts, interaction rule) and the channel to the client whose
/// presenter draws the prompts (nil: nobody can be asked).
package struct Prompting: Sendable {
    package var options: EvaluationOptions
    package var channel: PromptChannel?

    package init(options: EvaluationOptions, channel: PromptChannel?) {
        self.options = options
        self.channel = channel
    }

    /// Nobody can be asked.
    package static let none = Prompting(options: .nonInteractive, channel: nil)
}

/// The evaluator while no authentication context exists: no access-control list can be satisfied, so a guarded
/// item's data is never released. Reading it is `errSecInteractionNotAllowed` (an authentication would be needed
/// and there is no way to ask for one), or the item is skipped under `kSecUseAuthenticationUISkip`.
package struct NoCredentialEvaluator: AccessControlEvaluator {
    package init() {}

    package func authorize(
        _ policy: AccessControlPolicy, operation: AccessControlOperation, authenticationUI: AuthenticationUI,
        context: AuthenticationContextID?, prompting: Prompting
    ) -> AccessDecision {
        authenticationUI == .skip ? .skip : .denied(.interactionNotAllowed)
    }
}
