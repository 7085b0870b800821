import Foundation
import SecureCrypto

/// How a request that may need the user asks: the prompt's texts, whether it may ask at all, and how old a
/// fingerprint match may be. Carried by every request that may prompt; the presenter that draws the prompt stays
/// with the client, which answers the engine's ``PromptEvent``s.
package struct EvaluationOptions: Sendable, Equatable {
    /// The texts of the prompt. An empty reason in a keychain or key request means the engine's default text.
    package var prompt: EvaluationPrompt
    /// `LAContext.interactionNotAllowed`, or a client with nobody to draw prompts: a needed prompt fails at once
    /// (`notInteractive`, `errSecInteractionNotAllowed`).
    package var interactionNotAllowed: Bool
    /// `touchIDAuthenticationAllowableReuseDuration`, seconds (the engine caps it at 300).
    package var reuseDuration: TimeInterval
    /// The program a keychain request is made on behalf of (nil: the caller's own): its trusted-application lists
    /// are checked against that program, and its prompts name it, while the access groups stay the caller's. Only
    /// an administrative tool of the registry may name one (`lactl secret-service`, for the program at the other
    /// end of a D-Bus connection); localauthd identifies the process itself, by the rules every caller meets.
    package var subject: ProcessReference?

    /// Options with these values.
    package init(
        prompt: EvaluationPrompt, interactionNotAllowed: Bool = false, reuseDuration: TimeInterval = 0,
        subject: ProcessReference? = nil
    ) {
        self.prompt = prompt
        self.interactionNotAllowed = interactionNotAllowed
        self.reuseDuration = reuseDuration
        self.subject = subject
    }

    /// The options of a keychain or key request that has no `LAContext` of its own: the engine's default text,
    /// interaction allowed (the client turns it off when it has no presenter).
    package static let keychainDefault = EvaluationOptions(prompt: EvaluationPrompt(reason: ""))

    /// Options under which nothing prompts.
    package static let nonInteractive = EvaluationOptions(
        prompt: EvaluationPrompt(reason: ""), interactionNotAllowed: true)
}

extension EvaluationOptions: ProtocolCodable {
    /// A record: 1 prompt, 2 interactionNotAllowed, 3 reuseDuration, 4 subject (left out when nil, so the
    /// options of every other request are the bytes they were).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, prompt)
        writer.field(2, interactionNotAllowed)
        writer.field(3, reuseDuration)
        writer.optionalField(4, subject)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            prompt: try reader.field(1), interactionNotAllowed: try reader.field(2), reuseDuration: try reader.field(3),
            subject: try reader.optionalField(4))
    }
}

/// A request about authentication contexts: what `LAContext` and `lactl` ask the engine. A request that may
/// prompt carries its ``EvaluationOptions``; the prompts themselves travel as ``PromptEvent``s and
/// ``PromptAnswer``s beside it.
package enum AuthenticationRequest: Sendable, Equatable {
    /// A new context of the calling connection (answer: `.context`).
    case createContext
    /// Invalidate a context (in-flight evaluations end with `appCancel`).
    case invalidate(AuthenticationContextID)
    /// Forget a context (its `LAContext` is gone).
    case discard(AuthenticationContextID)
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
    /// Ask for the passcode through PAM and, on success, unlock the keychain's classes: the only way to unlock.
    case unlockWithPasscode(EvaluationOptions)
    /// Unlocks the keychain with an enrolled finger, which localauthd allows only within 48 hours of an unlock by
    /// passcode in its lifetime (this boot) and before biometry locks out (5 failed scans); otherwise fails with
    /// `biometryNotAvailable` (or `biometryLockout`), and only the passcode unlocks.
    case unlockWithBiometry(EvaluationOptions)
}

extension AuthenticationRequest {
    /// The context the request names, whose owner must be the calling connection.
    package var contextID: AuthenticationContextID? {
        switch self {
        case .invalidate(let id), .discard(let id), .evaluatePolicy(_, let id, _), .canEvaluatePolicy(_, let id),
            .evaluateAccessControl(_, _, let id, _), .setApplicationPassword(_, let id),
            .isApplicationPasswordSet(let id),
            .evaluatedDomainState(let id):
            return id
        case .createContext, .biometryState, .environment, .unlockWithPasscode, .unlockWithBiometry:
            return nil
        }
    }
}

extension AuthenticationRequest: ProtocolCodable {
    /// A variant: 1 createContext, 2 invalidate, 3 discard, 4 evaluatePolicy, 5 canEvaluatePolicy,
    /// 6 evaluateAccessControl, 7 setApplicationPassword, 8 isApplicationPasswordSet, 9 biometryState,
    /// 10 evaluatedDomainState, 11 environment, 12 unlockWithPasscode, 13 unlockWithBiometry; associated values as fields 1, 2, … in
    /// order, a nil password left out.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .createContext: writer.variant(1)
        case .invalidate(let id): writer.variant(2) { $0.field(1, id) }
        case .discard(let id): writer.variant(3) { $0.field(1, id) }
        case .evaluatePolicy(let policy, let id, let options):
            writer.variant(4) {
                $0.field(1, policy)
                $0.field(2, id)
                $0.field(3, options)
            }
        case .canEvaluatePolicy(let policy, let id):
            writer.variant(5) {
                $0.field(1, policy)
                $0.field(2, id)
            }
        case .evaluateAccessControl(let policy, let operation, let id, let options):
            writer.variant(6) {
                $0.field(1, policy)
                $0.field(2, operation)
                $0.field(3, id)
                $0.field(4, options)
            }
        case .setApplicationPassword(let password, let id):
            writer.variant(7) {
                $0.optionalField(1, password)
                $0.field(2, id)
            }
        case .isApplicationPasswordSet(let id): writer.variant(8) { $0.field(1, id) }
        case .biometryState: writer.variant(9)
        case .evaluatedDomainState(let id): writer.variant(10) { $0.field(1, id) }
        case .environment: writer.variant(11)
        case .unlockWithPasscode(let options): writer.variant(12) { $0.field(1, options) }
        case .unlockWithBiometry(let options): writer.variant(13) { $0.field(1, options) }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .createContext
            case 2: .invalidate(try payload.field(1))
            case 3: .discard(try payload.field(1))
            case 4: .evaluatePolicy(try payload.field(1), try payload.field(2), try payload.field(3))
            case 5: .canEvaluatePolicy(try payload.field(1), try payload.field(2))
            case 6:
                .evaluateAccessControl(
                    try payload.field(1), try payload.field(2), try payload.field(3), try payload.field(4))
            case 7: .setApplicationPassword(try payload.optionalField(1), try payload.field(2))
            case 8: .isApplicationPasswordSet(try payload.field(1))
            case 9: .biometryState
            case 10: .evaluatedDomainState(try payload.field(1))
            case 11: .environment
            case 12: .unlockWithPasscode(try payload.field(1))
            case 13: .unlockWithBiometry(try payload.field(1))
            default: nil
            }
        }
    }
}

/// The engine's answer to an ``AuthenticationRequest``.
package enum AuthenticationResponse: Sendable, Equatable {
    case success
    case context(AuthenticationContextID)
    case credential(Credential)
    case availability(PolicyAvailability)
    case flag(Bool)
    case biometryState(readerPresent: Bool, stateHash: Data?)
    case domainState(Data?)
    case environment(EnvironmentSnapshot)
}

extension AuthenticationResponse: ProtocolCodable {
    /// A variant: 1 success, 2 context, 3 credential, 4 availability, 5 flag, 6 biometryState (fields 1
    /// readerPresent, 2 stateHash), 7 domainState, 8 environment; associated values as fields 1, 2, nil ones left
    /// out.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .success: writer.variant(1)
        case .context(let id): writer.variant(2) { $0.field(1, id) }
        case .credential(let credential): writer.variant(3) { $0.field(1, credential) }
        case .availability(let availability): writer.variant(4) { $0.field(1, availability) }
        case .flag(let flag): writer.variant(5) { $0.field(1, flag) }
        case .biometryState(let readerPresent, let stateHash):
            writer.variant(6) {
                $0.field(1, readerPresent)
                $0.optionalField(2, stateHash)
            }
        case .domainState(let hash): writer.variant(7) { $0.optionalField(1, hash) }
        case .environment(let snapshot): writer.variant(8) { $0.field(1, snapshot) }
        }
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .success
            case 2: .context(try payload.field(1))
            case 3: .credential(try payload.field(1))
            case 4: .availability(try payload.field(1))
            case 5: .flag(try payload.field(1))
            case 6: .biometryState(readerPresent: try payload.field(1), stateHash: try payload.optionalField(2))
            case 7: .domainState(try payload.optionalField(1))
            case 8: .environment(try payload.field(1))
            default: nil
            }
        }
    }
}

extension AuthenticationRequest {
    /// The evaluation options the request carries, if it carries any.
    package var evaluationOptions: EvaluationOptions? {
        switch self {
        case .evaluatePolicy(_, _, let options), .evaluateAccessControl(_, _, _, let options),
            .unlockWithPasscode(let options), .unlockWithBiometry(let options):
            options
        default: nil
        }
    }
}
