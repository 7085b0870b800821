import Authenticators
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

/// The caller's side of one evaluation: texts, who draws the prompt, whether it may, how old a fingerprint may be.
package struct EvaluationOptions: Sendable {
    /// The texts of the prompt.
    package var prompt: EvaluationPrompt
    /// Who draws it; nil = nobody (`notInteractive` when a prompt is needed).
    package var presenter: (any EvaluationPresenter)?
    /// `LAContext.interactionNotAllowed`.
    package var interactionNotAllowed: Bool
    /// `touchIDAuthenticationAllowableReuseDuration`, seconds (capped at 300).
    package var reuseDuration: TimeInterval

    /// Options with these values.
    package init(
        prompt: EvaluationPrompt, presenter: (any EvaluationPresenter)?, interactionNotAllowed: Bool = false,
        reuseDuration: TimeInterval = 0
    ) {
        self.prompt = prompt
        self.presenter = presenter
        self.interactionNotAllowed = interactionNotAllowed
        self.reuseDuration = reuseDuration
    }
}

/// The engine's authentication contexts: the server side of every `LAContext`, the authenticators behind them, and
/// the credentials successful evaluations leave.
///
/// A client holds only an ``AuthenticationContextID`` (32 random bytes); everything else lives here. Evaluations
/// run their glue on the evaluation executor and their blocking calls on the authenticators' threads.
package final class AuthenticationContexts: Sendable {
    /// The longest reuse window honoured (`LATouchIDAuthenticationMaximumAllowableReuseDuration`).
    package static let maximumReuseDuration: TimeInterval = 300

    /// What the contexts were configured with.
    package let configuration: AuthenticationConfiguration
    /// The persisted attempt counters shared by both authenticators.
    package let attemptPolicy: AttemptPolicy
    /// Fingerprints through libfprint.
    package let biometric: BiometricAuthenticator
    /// Passcodes through PAM.
    package let passcode: PasscodeAuthenticator

    private struct Record {
        /// The client connection that created the context (0: the engine itself).
        var owner: UInt64 = 0
        var invalidated = false
        var credentials: [AuthenticationMethod: Credential] = [:]
        var applicationPassword: SecureBytes?
        var presenter: (any EvaluationPresenter)?
        var interactionNotAllowed = false
        var reason: String?
        var evaluatedDomainState: Data?
        var inFlight: [UInt64: @Sendable () -> Void] = [:]
    }

    private struct State {
        var records: [AuthenticationContextID: Record] = [:]
        /// The last fingerprint match, what the reuse window offers, and the context that made it.
        var lastBiometricSuccess: (time: Date, hash: Data?, context: AuthenticationContextID)?
        var nextToken: UInt64 = 0
        var passcodeSuccessHandler: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    /// Who is told when the environment changes.
    let environmentMonitor = EnvironmentMonitor()

    /// Contexts over authenticators made from `configuration` (nothing is opened until first use), counting attempts
    /// in `attemptPolicy` (the engine's, authenticated under its keybag).
    ///
    /// - Throws: `AuthenticationError` when the state directory cannot be created.
    package init(configuration: AuthenticationConfiguration, attemptPolicy: AttemptPolicy) throws {
        self.configuration = configuration
        self.attemptPolicy = attemptPolicy
        biometric = try BiometricAuthenticator(
            configuration: .init(
                stateDirectory: configuration.stateDirectory, username: configuration.username,
                drivers: configuration.readerDrivers, attemptTimeout: configuration.attemptTimeout),
            policy: attemptPolicy)
        passcode = PasscodeAuthenticator(configuration: configuration.passcode, policy: attemptPolicy)
    }

    /// Sets what runs after every passcode success (the engine unlocks the keychain's classes).
    package func onPasscodeSuccess(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.passcodeSuccessHandler = handler }
    }

    // MARK: Contexts

    /// A new context with no credential, belonging to client connection `owner` (0: the engine's own).
    package func createContext(owner: UInt64 = 0) throws -> AuthenticationContextID {
        let id = AuthenticationContextID(bytes: [UInt8](try SecureRandom.bytes(32)))
        state.withLock { $0.records[id] = Record(owner: owner) }
        return id
    }

    /// Throws `invalidContext` when `id` names a context that another client connection created: a context id is
    /// not a bearer token. An id naming no context passes (each use of it fails on its own).
    package func requireOwner(_ id: AuthenticationContextID, connection: UInt64) throws {
        let owner = state.withLock { $0.records[id]?.owner }
        if let owner, owner != connection {
            throw AuthenticationError(.invalidContext, "the authentication context belongs to another client")
        }
    }

    /// Ends every context of client connection `owner` (the connection closed): evaluations in flight are
    /// cancelled and the records dropped.
    package func discardAll(owner: UInt64) {
        let ids = state.withLock { state in state.records.filter { $0.value.owner == owner }.map(\.key) }
        for id in ids { discard(id) }
    }

    /// Ends a context: an evaluation in flight fails with `appCancel`, later use with `invalidContext`; its
    /// credentials and application password are dropped, and a fingerprint match it made leaves the reuse window
    /// (`LAContext.invalidate()` forgets the match). Idempotent.
    package func invalidate(_ id: AuthenticationContextID) {
        end(id, forgettingMatch: true)
    }

    /// Forgets a context entirely (its client is gone). A match it made stays in the reuse window, as a device
    /// unlock would.
    package func discard(_ id: AuthenticationContextID) {
        end(id, forgettingMatch: false)
        state.withLock { _ = $0.records.removeValue(forKey: id) }
    }

    private func end(_ id: AuthenticationContextID, forgettingMatch: Bool) {
        let cancels = state.withLock { state -> [@Sendable () -> Void] in
            if forgettingMatch && state.lastBiometricSuccess?.context == id { state.lastBiometricSuccess = nil }
            guard var record = state.records[id] else { return [] }
            let cancels = Array(record.inFlight.values)
            record = Record()
            record.invalidated = true
            state.records[id] = record
            return cancels
        }
        for cancel in cancels { cancel() }
    }

    /// The context's credentials. - Throws: `invalidContext` for an unknown or invalidated context.
    package func credentials(for id: AuthenticationContextID) throws -> [Credential] {
        try withRecord(id) { Array($0.credentials.values) }
    }

    /// Sets or (with nil) removes the context's application password (`LACredentialType.applicationPassword`).
    package func setApplicationPassword(_ password: SecureBytes?, for id: AuthenticationContextID) throws {
        try withRecord(id) { $0.applicationPassword = password }
    }

    /// The context's application password, if set.
    package func applicationPassword(for id: AuthenticationContextID) throws -> SecureBytes? {
        try withRecord(id) { $0.applicationPassword }
    }

    /// Records the presenter, reason and interaction rule keychain prompts for this context use.
    package func configure(
        _ id: AuthenticationContextID, presenter: (any EvaluationPresenter)?, reason: String?,
        interactionNotAllowed: Bool
    ) throws {
        try withRecord(id) {
            $0.presenter = presenter
            $0.reason = reason
            $0.interactionNotAllowed = interactionNotAllowed
        }
    }

    /// The presenter, reason and interaction rule recorded for `id`.
    func promptSettings(
        _ id: AuthenticationContextID
    ) throws -> (presenter: (any EvaluationPresenter)?, reason: String?, interactionNotAllowed: Bool) {
        try withRecord(id) { ($0.presenter, $0.reason, $0.interactionNotAllowed) }
    }

    /// The enrolled-set hash recorded by the last successful biometric evaluation or check of this context.
    package func evaluatedDomainState(for id: AuthenticationContextID) throws -> Data? {
        try withRecord(id) { $0.evaluatedDomainState }
    }

    private func withRecord<Value>(
        _ id: AuthenticationContextID, _ body: (inout Record) throws -> Value
    ) throws -> Value {
        try state.withLock { state in
            guard var record = state.records[id], !record.invalidated else {
                throw AuthenticationError(.invalidContext, "the authentication context was invalidated")
            }
            let value = try body(&record)
            state.records[id] = record
            return value
        }
    }

    private func isInvalidated(_ id: AuthenticationContextID) -> Bool {
        state.withLock { $0.records[id]?.invalidated ?? true }
    }

    // MARK: Biometric state

    /// The current enrolled-set state hash; nil when nothing is enrolled.
    package func currentStateHash() throws -> Data? {
        try biometric.stateHash()
    }

    /// Whether an acceptable fingerprint reader can be opened.
    package func isReaderPresent() async -> Bool {
        (try? await biometric.open()) != nil
    }

    /// Closes the fingerprint reader (the next evaluation opens it again).
    package func closeReader() async {
        await biometric.close()
    }

    // MARK: Evaluation

    /// Evaluates `policy` in context `id`, prompting through `options.presenter`, and records the credential.
    ///
    /// - Throws: `AuthenticationError` with `LAError` codes: `invalidContext`, `appCancel` (invalidated or the task
    ///   cancelled meanwhile), `notInteractive`, `userCancel`, `userFallback`, `authenticationFailed`,
    ///   `biometryLockout`, `biometryNotAvailable`, `biometryNotEnrolled`, `passcodeNotSet`, `systemCancel`,
    ///   code -11 (`companionNotAvailable`) for companion and wrist-detection policies.
    @discardableResult
    package func evaluate(
        _ policy: EvaluationPolicy, context id: AuthenticationContextID, options: EvaluationOptions
    ) async throws -> Credential {
        _ = try credentials(for: id)
        let policy = policy == .biometricsOrCompanion ? .biometrics : policy
        if policy == .companion || policy == .wristDetection {
            throw AuthenticationError(Self.companionNotAvailable, "no companion device can be used on Linux")
        }
        if let reused = try reusableBiometricCredential(policy: policy, window: options.reuseDuration) {
            try record(reused, in: id)
            return reused
        }
        guard !options.interactionNotAllowed, let presenter = options.presenter else {
            throw AuthenticationError(.notInteractive, "an authentication is needed and interaction is not allowed")
        }
        let cancelled = Mutex(false)
        let work = Task(executorPreference: BlockingBridge.executor) {
            try await self.perform(
                policy, context: id, presenter: presenter, prompt: options.prompt,
                isCancelled: { cancelled.withLock { $0 } || self.isInvalidated(id) })
        }
        let cancel: @Sendable () -> Void = {
            cancelled.withLock { $0 = true }
            work.cancel()
        }
        let token = try register(cancel, for: id)
        defer { unregister(token, for: id) }
        let credential: Credential
        do {
            credential = try await withTaskCancellationHandler { try await work.value } onCancel: { cancel() }
            environmentMayHaveChanged()
        } catch {
            // A failure may have locked biometry out; a disconnect takes the reader away.
            environmentMayHaveChanged(
                readerDisconnected: (error as? AuthenticationError)?.code == .biometryDisconnected)
            if cancelled.withLock({ $0 }) || isInvalidated(id) {
                throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app")
            }
            throw error
        }
        if isInvalidated(id) { throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app") }
        try record(credential, in: id)
        return credential
    }

    /// Whether `policy` could be evaluated now, without prompting; also records the domain state in `id`.
    package func canEvaluate(_ policy: EvaluationPolicy, context id: AuthenticationContextID?) async -> PolicyAvailability {
        if let id, isInvalidated(id) {
            return PolicyAvailability(
                readerPresent: false, error: AuthenticationError(.invalidContext, "the context was invalidated"))
        }
        let readerPresent = await isReaderPresent()
        var availability = PolicyAvailability(readerPresent: readerPresent)
        do {
            switch policy {
            case .companion, .wristDetection:
                throw AuthenticationError(Self.companionNotAvailable, "no companion device can be used on Linux")
            case .biometrics, .biometricsOrCompanion:
                guard readerPresent else {
                    throw AuthenticationError(.biometryNotAvailable, "no usable fingerprint reader is present")
                }
                guard let hash = try currentStateHash(), !(try biometric.enrolledPrints().isEmpty) else {
                    throw AuthenticationError(
                        .biometryNotEnrolled, "no fingerprint is enrolled for \(configuration.username)")
                }
                try attemptPolicy.checkBiometryAllowed()
                try await requirePasscodeSet()
                availability.domainState = hash
                if let id { try? withRecord(id) { $0.evaluatedDomainState = hash } }
            case .deviceOwner, .passcode:
                try await requirePasscodeSet()
            }
        } catch let error as AuthenticationError {
            availability.error = error
        } catch {
            availability.error = AuthenticationError(.invalidContext, "the authentication state cannot be read")
        }
        return availability
    }

    /// `LAError.companionNotAvailable` (-11), which the authenticators have no name for.
    static let companionNotAvailable = AuthenticationError.Code(rawValue: -11)

    private func requirePasscodeSet() async throws {
        guard try await passcode.isPasscodeSet(user: configuration.username) else {
            throw AuthenticationError(
                .passcodeNotSet, "PAM service '\(configuration.passcode.service)' cannot authenticate the user")
        }
    }

    private func register(_ cancel: @escaping @Sendable () -> Void, for id: AuthenticationContextID) throws -> UInt64 {
        try state.withLock { state in
            guard var record = state.records[id], !record.invalidated else {
                throw AuthenticationError(.invalidContext, "the authentication context was invalidated")
            }
            state.nextToken += 1
            record.inFlight[state.nextToken] = cancel
            state.records[id] = record
            return state.nextToken
        }
    }

    private func unregister(_ token: UInt64, for id: AuthenticationContextID) {
        state.withLock { _ = $0.records[id]?.inFlight.removeValue(forKey: token) }
    }

    private func record(_ credential: Credential, in id: AuthenticationContextID) throws {
        try withRecord(id) { record in
            record.credentials[credential.method] = credential
            if credential.method == .biometry { record.evaluatedDomainState = credential.enrolledSetHash }
        }
    }

    /// A fingerprint success younger than the window (at most 300 s) with the enrolled set unchanged.
    private func reusableBiometricCredential(policy: EvaluationPolicy, window: TimeInterval) throws -> Credential? {
        guard policy == .biometrics || policy == .deviceOwner, window > 0 else { return nil }
        guard let last = state.withLock({ $0.lastBiometricSuccess }) else { return nil }
        let now = configuration.clock.now()
        let age = now.timeIntervalSince(last.time)
        guard age >= 0, age <= min(window, Self.maximumReuseDuration) else { return nil }
        let hash = try currentStateHash()
        guard hash != nil, hash == last.hash else { return nil }
        return Credential(
            method: .biometry, time: last.time, enrolledSetHash: hash, user: configuration.username, isReused: true)
    }

    private func perform(
        _ policy: EvaluationPolicy, context id: AuthenticationContextID, presenter: any EvaluationPresenter,
        prompt: EvaluationPrompt, isCancelled: @escaping @Sendable () -> Bool
    ) async throws -> Credential {
        switch policy {
        case .passcode:
            return try await passcodeStep(presenter: presenter, prompt: prompt, isCancelled: isCancelled)
        case .deviceOwner:
            if await biometryUsable() {
                do {
                    return try await biometricStep(context: id, presenter: presenter, prompt: prompt)
                } catch AuthenticationError.Code.userFallback {
                } catch AuthenticationError.Code.authenticationFailed {
                } catch AuthenticationError.Code.biometryLockout {
                } catch AuthenticationError.Code.biometryNotAvailable {
                } catch AuthenticationError.Code.biometryDisconnected {
                }
            }
            if isCancelled() { throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app") }
            return try await passcodeStep(presenter: presenter, prompt: prompt, isCancelled: isCancelled)
        default:
            return try await biometricStep(context: id, presenter: presenter, prompt: prompt)
        }
    }

    /// Whether a fingerprint could be asked for: something enrolled, not locked, a reader present.
    private func biometryUsable() async -> Bool {
        guard (try? biometric.enrolledPrints().isEmpty) == false, (try? attemptPolicy.checkBiometryAllowed()) != nil
        else { return false }
        return await isReaderPresent()
    }

    private func biometricStep(
        context id: AuthenticationContextID, presenter: any EvaluationPresenter, prompt: EvaluationPrompt
    ) async throws -> Credential {
        let action = Mutex<PromptAction?>(nil)
        let biometric = self.biometric
        let verification = Task(executorPreference: BlockingBridge.executor) {
            try await biometric.verify { event in
                switch event {
                case .waitingForFinger: presenter.fingerprintPrompt(.waitingForFinger)
                case .retry(let reason, _): presenter.fingerprintPrompt(.retry(reason: reason))
                }
            }
        }
        presenter.fingerprintPromptDidBegin(prompt) { chosen in
            let first = action.withLock { current -> Bool in
                guard current == nil else { return false }
                current = chosen
                return true
            }
            if first { verification.cancel() }
        }
        defer { presenter.fingerprintPromptDidEnd() }
        do {
            _ = try await withTaskCancellationHandler { try await verification.value } onCancel: {
                verification.cancel()
            }
        } catch {
            switch action.withLock({ $0 }) {
            case .cancel?: throw AuthenticationError(.userCancel, "the user cancelled the fingerprint prompt")
            case .fallback?: throw AuthenticationError(.userFallback, "the user chose the passcode instead")
            case nil: break
            }
            if case AuthenticationError.Code.authenticationFailed = error { presenter.fingerprintPrompt(.notRecognized) }
            throw error
        }
        let hash = try currentStateHash()
        let now = configuration.clock.now()
        state.withLock { $0.lastBiometricSuccess = (now, hash, id) }
        return Credential(method: .biometry, time: now, enrolledSetHash: hash, user: configuration.username)
    }

    private func passcodeStep(
        presenter: any EvaluationPresenter, prompt: EvaluationPrompt, isCancelled: @escaping @Sendable () -> Bool
    ) async throws -> Credential {
        let conversation = PasscodeConversation(presenter: presenter, prompt: prompt, isCancelled: isCancelled)
        try await passcode.authenticate(user: configuration.username, presenter: conversation, isCancelled: isCancelled)
        let handler = state.withLock { $0.passcodeSuccessHandler }
        handler?()
        return Credential(
            method: .passcode, time: configuration.clock.now(), enrolledSetHash: try? currentStateHash(),
            user: configuration.username)
    }
}
