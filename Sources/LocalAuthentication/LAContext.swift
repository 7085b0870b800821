import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import Synchronization
import WorkThreads

/// A mechanism for evaluating authentication policies and access controls (`LAContext`).
///
/// The context's state (its credentials, the application password, what it evaluated) lives in the engine; this
/// object holds only an unguessable handle to it, created on first use, so it can be passed to the keychain as
/// `kSecUseAuthenticationContext`. It talks to the same engine as the SecItem functions of the task that created it.
///
/// Differences from Apple:
/// - Prompts are drawn by ``presenter`` (the terminal by default), not by the system; with no presenter an
///   evaluation that needs the user fails with ``LAError/Code/notInteractive``.
/// - A fingerprint means a libfprint reader (``biometryType`` is ``LABiometryType/touchID``); the passcode is the
///   user's password checked by the PAM service `local-authentication` (configurable, see docs/).
/// - For `.deviceOwnerAuthentication` one fingerprint attempt is made; a finger that is not recognised, a lockout
///   or the fallback button leads to the passcode.
/// - An empty `localizedReason` fails with ``LAError/Code/authenticationFailed`` instead of raising an exception.
/// - `evaluatePolicy` with the biometric policy does not re-check that a passcode is set (one PAM transaction
///   per evaluation); ``canEvaluatePolicy(_:error:)`` does, and reports `passcodeNotSet`.
/// - Keychain prompts for an item read with this context block the calling thread, as Apple's do, while the
///   engine holds a read snapshot of the store.
open class LAContext: NSObject, @unchecked Sendable {
    // Safe to share: every mutable field lives in `state`, a Mutex; `client` is immutable after init.
    private struct State {
        var id: AuthenticationContextID?
        var invalidated = false
        var localizedReason = ""
        var localizedFallbackTitle: String?
        var localizedCancelTitle: String?
        var reuseDuration: TimeInterval = 0
        var interactionNotAllowed = false
        var biometryType = LABiometryType.none
        var presenter: (any AuthenticationPresenter)?
    }

    private let client: Result<any SecurityClient, LAError>
    private let state: Mutex<State>

    /// A context on the keychain engine the current task uses (the default store, or the one a test bound).
    public override init() {
        do {
            client = .success(try KeychainClientSelection.resolve())
        } catch {
            client = .failure(LAError(.invalidContext, "the authentication service cannot be opened"))
        }
        var initial = State()
        if ProcessInfo.processInfo.environment["LA_PRESENTER"] != "none", TerminalAuthenticationPresenter.isAvailable {
            initial.presenter = TerminalAuthenticationPresenter()
        }
        state = Mutex(initial)
        super.init()
    }

    deinit {
        if let id = state.withLock({ $0.id }), case .success(let client) = client {
            Task { _ = try? await client.send(.discard(id)) }
        }
    }

    // MARK: Properties

    /// Who draws this context's prompts (not in Apple's API): by default ``TerminalAuthenticationPresenter`` when
    /// the process has a terminal (and `$LA_PRESENTER` is not `none`), else nil.
    public var presenter: (any AuthenticationPresenter)? {
        get { state.withLock { $0.presenter } }
        set { state.withLock { $0.presenter = newValue } }
    }

    /// The reason shown when the keychain prompts for an item this context is passed with.
    public var localizedReason: String {
        get { state.withLock { $0.localizedReason } }
        set { state.withLock { $0.localizedReason = newValue } }
    }

    /// The fallback button's title: nil = "Enter Password", "" = no fallback offered.
    public var localizedFallbackTitle: String? {
        get { state.withLock { $0.localizedFallbackTitle } }
        set { state.withLock { $0.localizedFallbackTitle = newValue } }
    }

    /// The cancel button's title: nil or "" = "Cancel".
    public var localizedCancelTitle: String? {
        get { state.withLock { $0.localizedCancelTitle } }
        set { state.withLock { $0.localizedCancelTitle = newValue } }
    }

    /// How old a fingerprint success may be and still count without a new scan (default 0). Values above
    /// ``LATouchIDAuthenticationMaximumAllowableReuseDuration`` (300 s) are kept but count as 300 s.
    ///
    /// Differs from Apple: the success reused is the last fingerprint match through this engine (any context),
    /// not the device unlock, and only while the enrolled fingerprints are unchanged.
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { state.withLock { $0.reuseDuration } }
        set { state.withLock { $0.reuseDuration = newValue } }
    }

    /// When true, an evaluation that needs the user fails with ``LAError/Code/notInteractive`` and a keychain read
    /// with this context fails with `errSecInteractionNotAllowed` instead of prompting.
    public var interactionNotAllowed: Bool {
        get { state.withLock { $0.interactionNotAllowed } }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    /// ``LABiometryType/touchID`` once ``canEvaluatePolicy(_:error:)`` found a fingerprint reader, else `.none`.
    public var biometryType: LABiometryType { state.withLock { $0.biometryType } }

    /// No longer supported (as on Apple platforms): setting it has no effect, reading it gives nil.
    public var maxBiometryFailures: NSNumber? {
        get { nil }
        set {}
    }

    /// The enrolled-fingerprint hash seen by the last successful biometric evaluation or check of this context;
    /// nil before one. Compare it between runs to notice enrollment changes. As Apple's, it is different in each
    /// application (derived from the enrolled set and the application's identity), so it cannot track the user.
    public var evaluatedPolicyDomainState: Data? {
        guard let id = state.withLock({ $0.id }), case .success(let client) = client else { return nil }
        let response = try? client.sendBlocking(.evaluatedDomainState(id))
        if case .domainState(let hash)? = response { return hash }
        return nil
    }

    /// The current authentication state: the enrolled fingerprints' hash (different in each application, as Apple's)
    /// and the reader's presence.
    ///
    /// Blocks while the engine checks the reader.
    public var domainState: LADomainState {
        var present = false
        var hash: Data?
        if case .success(let client) = client,
            case .environment(let snapshot)? = try? client.sendBlocking(.environment)
        {
            present = snapshot.readerPresent
            hash = snapshot.stateHash
        }
        return LADomainState(
            biometry: LADomainStateBiometry(biometryType: present ? .touchID : .none, stateHash: hash))
    }

    // MARK: Evaluation

    /// Whether `policy` can be evaluated now, without prompting; sets ``biometryType`` as a side effect.
    ///
    /// - Parameters:
    ///   - policy: the policy to check.
    ///   - error: receives an `LAError` (as `NSError`) when it cannot: `biometryNotAvailable` (no reader),
    ///     `biometryNotEnrolled`, `biometryLockout`, `passcodeNotSet` (the PAM service cannot authenticate the user),
    ///     `companionNotAvailable` (companion, watch and wrist policies), `invalidContext`.
    /// - Blocks the calling thread while it opens the reader and asks PAM whether the account can authenticate.
    @discardableResult
    public func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        let outcome: Result<PolicyAvailability, LAError> = Result {
            try checkUsable()
            let client = try self.client.get()
            let id = try contextIDBlocking()
            let response = try client.sendBlocking(.canEvaluatePolicy(EvaluationPolicy(policy), id))
            guard case .availability(let availability) = response else {
                throw LAError(.invalidContext, "unexpected answer from the authentication service")
            }
            return availability
        }.mapError(LAError.from)
        switch outcome {
        case .success(let availability):
            state.withLock { $0.biometryType = availability.readerPresent ? .touchID : .none }
            if let failure = availability.error {
                error?.pointee = LAError(failure) as NSError
                return false
            }
            return true
        case .failure(let failure):
            error?.pointee = failure as NSError
            return false
        }
    }

    /// Evaluates `policy`, prompting through ``presenter`` with `localizedReason`.
    ///
    /// - Returns: true; failures throw.
    /// - Throws: ``LAError``: `userCancel`, `userFallback` (biometric policy), `authenticationFailed`,
    ///   `biometryLockout` (after 5 failed fingerprints, until a passcode success), `biometryNotAvailable`,
    ///   `biometryNotEnrolled`, `passcodeNotSet`, `systemCancel` (no finger in time), `appCancel` (``invalidate()``
    ///   meanwhile, or the task was cancelled), `invalidContext` (invalidated before), `notInteractive`,
    ///   `companionNotAvailable`. A passcode success also unlocks the keychain.
    @discardableResult
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await evaluate(reason: localizedReason) { .evaluatePolicy(EvaluationPolicy(policy), $0, $1) }
    }

    /// Sends the evaluation `request` makes of this context's identifier and the prompt's options, prompting
    /// through this context's presenter; true when it succeeded.
    ///
    /// - Throws: ``LAError``: `authenticationFailed` for an empty `reason`, else what the engine answered.
    private func evaluate(
        reason: String, _ request: (AuthenticationContextID, EvaluationOptions) -> AuthenticationRequest
    ) async throws -> Bool {
        guard !reason.isEmpty else {
            throw LAError(.authenticationFailed, "localizedReason must not be empty")
        }
        do {
            try checkUsable()
            let client = try self.client.get()
            let id = try await contextID()
            let (options, presenter) = evaluationOptions(reason: reason)
            _ = try await client.send(request(id, options), presenter: presenter)
            return true
        } catch {
            throw LAError.from(error)
        }
    }

    /// Evaluates `policy` and calls `reply` (on another thread) with the outcome; see
    /// ``evaluatePolicy(_:localizedReason:)``. The error, when there is one, is an ``LAError``.
    public func evaluatePolicy(
        _ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        Task.detached {
            do {
                reply(try await self.evaluatePolicy(policy, localizedReason: localizedReason), nil)
            } catch {
                reply(false, error)
            }
        }
    }

    /// Authenticates until this context satisfies `accessControl` for `operation`; afterwards pass the context as
    /// `kSecUseAuthenticationContext` and the keychain does not prompt.
    ///
    /// - Throws: ``LAError`` as ``evaluatePolicy(_:localizedReason:)``; `authenticationFailed` when the list can
    ///   never be satisfied (a `.biometryCurrentSet` list whose fingerprints changed).
    @discardableResult
    public func evaluateAccessControl(
        _ accessControl: SecAccessControl, operation: LAAccessControlOperation, localizedReason: String
    ) async throws -> Bool {
        try await evaluate(reason: localizedReason) {
            .evaluateAccessControl(accessControl.policy, AccessControlOperation(operation), $0, $1)
        }
    }

    /// Calls `reply` (on another thread) with the outcome of
    /// ``evaluateAccessControl(_:operation:localizedReason:)``.
    public func evaluateAccessControl(
        _ accessControl: SecAccessControl, operation: LAAccessControlOperation, localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        Task.detached {
            do {
                reply(
                    try await self.evaluateAccessControl(
                        accessControl, operation: operation, localizedReason: localizedReason), nil)
            } catch {
                reply(false, error)
            }
        }
    }

    /// Ends the context: an evaluation in flight fails with `appCancel`, later calls with `invalidContext`, and
    /// its credentials are forgotten. Idempotent.
    public func invalidate() {
        let id = state.withLock { state -> AuthenticationContextID? in
            state.invalidated = true
            return state.id
        }
        guard let id, case .success(let client) = client else { return }
        _ = try? client.sendBlocking(.invalidate(id))
    }

    // MARK: Credentials

    /// Sets (or with nil removes) the application password keychain items with `.applicationPassword` need.
    ///
    /// - Returns: false for `.smartCardPIN` (not supported on Linux) or an invalidated context.
    @discardableResult
    public func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        guard type == .applicationPassword, case .success(let client) = client else { return false }
        let secret = credential.map { SecureBytes($0) }
        do {
            try checkUsable()
            let id = try contextIDBlocking()
            _ = try client.sendBlocking(.setApplicationPassword(secret, id))
            return true
        } catch {
            return false
        }
    }

    /// Whether a credential of `type` is set.
    @discardableResult
    public func isCredentialSet(_ type: LACredentialType) -> Bool {
        guard type == .applicationPassword, case .success(let client) = client,
            let id = state.withLock({ $0.invalidated ? nil : $0.id })
        else { return false }
        let response = try? client.sendBlocking(.isApplicationPasswordSet(id))
        if case .flag(let isSet)? = response { return isSet }
        return false
    }

    // MARK: Internals

    private func checkUsable() throws {
        if state.withLock({ $0.invalidated }) {
            throw LAError(.invalidContext, "the context was invalidated")
        }
    }

    /// What an evaluation with `reason` sends, and who draws its prompts.
    private func evaluationOptions(reason: String) -> (EvaluationOptions, (any EvaluationPresenter)?) {
        state.withLock { state in
            let options = EvaluationOptions(
                prompt: EvaluationPrompt(
                    reason: reason, fallbackTitle: state.localizedFallbackTitle,
                    cancelTitle: state.localizedCancelTitle),
                interactionNotAllowed: state.interactionNotAllowed,
                reuseDuration: min(state.reuseDuration, LATouchIDAuthenticationMaximumAllowableReuseDuration))
            return (options, PresenterAdapter.wrapping(state.presenter))
        }
    }

    /// The engine-side context, created on first use.
    private func contextID() async throws -> AuthenticationContextID {
        if let id = state.withLock({ $0.id }) { return id }
        let client = try self.client.get()
        guard case .context(let created) = try await client.send(.createContext) else {
            throw LAError(.invalidContext, "unexpected answer from the authentication service")
        }
        let (id, extra) = state.withLock { state -> (AuthenticationContextID, AuthenticationContextID?) in
            if let existing = state.id { return (existing, created) }
            state.id = created
            return (created, nil)
        }
        if let extra { _ = try? await client.send(.discard(extra)) }
        return id
    }

    private func contextIDBlocking() throws -> AuthenticationContextID {
        if let id = state.withLock({ $0.id }) { return id }
        return try BlockingBridge.wait { try await self.contextID() }
    }
}

extension LAContext: AuthenticationContextHandle {
    /// The engine-side handle for `kSecUseAuthenticationContext`, created on first use.
    package func authenticationContextID() throws -> AuthenticationContextID {
        try checkUsable()
        return try contextIDBlocking()
    }

    /// A keychain prompt for a request with this context shows its `localizedReason` (the engine's text when it
    /// is empty) and titles, and does not happen when `interactionNotAllowed`.
    package var keychainPromptOptions: EvaluationOptions {
        state.withLock { state in
            EvaluationOptions(
                prompt: EvaluationPrompt(
                    reason: state.localizedReason, fallbackTitle: state.localizedFallbackTitle,
                    cancelTitle: state.localizedCancelTitle),
                interactionNotAllowed: state.interactionNotAllowed)
        }
    }

    /// This context's ``presenter``.
    package var keychainPresenter: (any EvaluationPresenter)? {
        PresenterAdapter.wrapping(presenter)
    }
}

extension EvaluationPolicy {
    init(_ policy: LAPolicy) {
        self = EvaluationPolicy(rawValue: policy.rawValue) ?? .companion
    }
}

extension AccessControlOperation {
    init(_ operation: LAAccessControlOperation) {
        switch operation {
        case .createItem, .useItem, .createKey: self = .readData
        case .useKeySign: self = .useKeySign
        case .useKeyDecrypt: self = .useKeyDecrypt
        case .useKeyKeyExchange: self = .useKeyKeyExchange
        }
    }
}
