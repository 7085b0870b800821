import Authenticators
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization
import WorkThreads

/// Evaluating a policy in a context: the reuse window, the fingerprint step on the reader, the passcode step
/// through PAM, cancellation by invalidation, and what `canEvaluatePolicy` reports.
extension AuthenticationContexts {
    /// Evaluates `policy` in context `id`, prompting through `prompts` (the request's channel to its client), and
    /// records the credential.
    ///
    /// - Throws: `AuthenticationError` with `LAError` codes: `invalidContext`, `appCancel` (invalidated or the task
    ///   cancelled meanwhile), `notInteractive`, `userCancel`, `userFallback`, `authenticationFailed`,
    ///   `biometryLockout`, `biometryNotAvailable`, `biometryNotEnrolled`, `passcodeNotSet`, `systemCancel` (no
    ///   finger in time, or the client went away mid-prompt),
    ///   code -11 (`companionNotAvailable`) for companion and wrist-detection policies; `authenticationFailed`,
    ///   before anything else, when the prompt's reason, fallback or cancel title holds a control or bidirectional
    ///   formatting character (``SecurityProtocol/PromptText``: the prompt would show what the program drew with
    ///   it, not what the daemon verified). Apple raises an exception for malformed arguments (an empty reason);
    ///   here, as for the empty reason, the evaluation fails instead.
    @discardableResult
    package func evaluate(
        _ policy: EvaluationPolicy, context id: AuthenticationContextID, options: EvaluationOptions,
        prompts: PromptChannel?
    ) async throws -> Credential {
        _ = try credentials(for: id)
        try Self.requireShowable(options.prompt)
        let policy = policy == .biometricsOrCompanion ? .biometrics : policy
        if policy == .companion || policy == .wristDetection {
            throw AuthenticationError(Self.companionNotAvailable, "no companion device can be used on Linux")
        }
        if let reused = try reusableBiometricCredential(policy: policy, window: options.reuseDuration) {
            try record(reused, in: id)
            return reused
        }
        guard !options.interactionNotAllowed, let prompts, !prompts.isClosed else {
            throw AuthenticationError(.notInteractive, "an authentication is needed and interaction is not allowed")
        }
        let cancelled = Mutex(false)
        let work = Task(executorPreference: BlockingBridge.executor) {
            try await self.perform(
                policy, context: id, prompts: prompts, prompt: options.prompt,
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
            credential = try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                cancel()
            }
            environmentMayHaveChanged()
        } catch {
            // A failure may have locked biometry out; a disconnect takes the reader away.
            environmentMayHaveChanged(
                readerDisconnected: (error as? AuthenticationError)?.code == .biometryDisconnected)
            if cancelled.withLock({ $0 }) || isInvalidated(id) {
                throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app")
            }
            if prompts.isClosed {
                throw AuthenticationError(.systemCancel, "the client that was asked went away")
            }
            throw error
        }
        if isInvalidated(id) { throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app") }
        try record(credential, in: id)
        return credential
    }

    /// Whether `policy` could be evaluated now, without prompting; also records the domain state in `id`.
    package func canEvaluate(_ policy: EvaluationPolicy, context id: AuthenticationContextID?) async
        -> PolicyAvailability
    {
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

    func requirePasscodeSet() async throws {
        guard try await isPasscodeUsable() else {
            throw AuthenticationError(
                .passcodeNotSet, "PAM service '\(configuration.passcode.service)' cannot authenticate the user")
        }
    }

    func register(_ cancel: @escaping @Sendable () -> Void, for id: AuthenticationContextID) throws -> UInt64 {
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

    func unregister(_ token: UInt64, for id: AuthenticationContextID) {
        state.withLock { _ = $0.records[id]?.inFlight.removeValue(forKey: token) }
    }

    func record(_ credential: Credential, in id: AuthenticationContextID) throws {
        try withRecord(id) { record in
            record.credentials[credential.method] = credential
            if credential.method == .biometry { record.evaluatedDomainState = credential.enrolledSetHash }
        }
    }

    /// A fingerprint success younger than the window (at most 300 s) with the enrolled set unchanged.
    func reusableBiometricCredential(policy: EvaluationPolicy, window: TimeInterval) throws -> Credential? {
        guard policy == .biometrics || policy == .deviceOwner, window > 0 else { return nil }
        guard let last = state.withLock({ $0.lastBiometricSuccess }) else { return nil }
        // On the boot-time clock: a wall clock stepped back does not make an old match young again.
        let age = configuration.clock.sinceBoot() - last.sinceBoot
        guard age >= 0, age <= min(window, Self.maximumReuseDuration) else { return nil }
        let hash = try currentStateHash()
        guard hash != nil, hash == last.hash else { return nil }
        return Credential(
            method: .biometry, time: last.time, enrolledSetHash: hash, user: configuration.username, isReused: true)
    }

    /// Throws `authenticationFailed` when `prompt` holds text no prompt may show (``EvaluationPrompt/unshowableText``).
    static func requireShowable(_ prompt: EvaluationPrompt) throws {
        if let problem = prompt.unshowableText {
            throw AuthenticationError(.authenticationFailed, "the prompt was refused: \(problem)")
        }
    }

    func perform(
        _ policy: EvaluationPolicy, context id: AuthenticationContextID, prompts: PromptChannel,
        prompt: EvaluationPrompt, isCancelled: @escaping @Sendable () -> Bool
    ) async throws -> Credential {
        switch policy {
        case .passcode:
            return try await passcodeStep(context: id, prompts: prompts, prompt: prompt, isCancelled: isCancelled)
        case .deviceOwner:
            if await biometryUsable() {
                do {
                    return try await biometricStep(context: id, prompts: prompts, prompt: prompt)
                } catch AuthenticationError.Code.userFallback {
                } catch AuthenticationError.Code.authenticationFailed {
                } catch AuthenticationError.Code.biometryLockout {
                } catch AuthenticationError.Code.biometryNotAvailable {
                } catch AuthenticationError.Code.biometryDisconnected {
                }
            }
            if isCancelled() { throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app") }
            return try await passcodeStep(context: id, prompts: prompts, prompt: prompt, isCancelled: isCancelled)
        default:
            return try await biometricStep(context: id, prompts: prompts, prompt: prompt)
        }
    }

    /// Whether a fingerprint could be asked for: something enrolled, not locked, a reader present.
    func biometryUsable() async -> Bool {
        guard (try? biometric.enrolledPrints().isEmpty) == false, (try? attemptPolicy.checkBiometryAllowed()) != nil
        else { return false }
        return await isReaderPresent()
    }

    func biometricStep(
        context id: AuthenticationContextID, prompts: PromptChannel, prompt: EvaluationPrompt
    ) async throws -> Credential {
        let action = Mutex<PromptAction?>(nil)
        let biometric = self.biometric
        let verification = Task(executorPreference: BlockingBridge.executor) {
            try await biometric.verify { event in
                switch event {
                case .waitingForFinger: prompts.fingerprintPrompt(.waitingForFinger)
                case .retry(let reason, _): prompts.fingerprintPrompt(.retry(reason: reason))
                }
            }
        }
        prompts.fingerprintPromptDidBegin(prompt) { chosen in
            let first = action.withLock { current -> Bool in
                guard current == nil else { return false }
                current = chosen
                return true
            }
            if first { verification.cancel() }
        }
        defer { prompts.fingerprintPromptDidEnd() }
        do {
            _ = try await withTaskCancellationHandler {
                try await verification.value
            } onCancel: {
                verification.cancel()
            }
        } catch {
            switch action.withLock({ $0 }) {
            case .cancel?: throw AuthenticationError(.userCancel, "the user cancelled the fingerprint prompt")
            case .fallback?: throw AuthenticationError(.userFallback, "the user chose the passcode instead")
            case nil: break
            }
            if case AuthenticationError.Code.authenticationFailed = error { prompts.fingerprintPrompt(.notRecognized) }
            throw error
        }
        let hash = try currentStateHash()
        let now = configuration.clock.now()
        let sinceBoot = configuration.clock.sinceBoot()
        state.withLock { $0.lastBiometricSuccess = (now, sinceBoot, hash, id) }
        return Credential(method: .biometry, time: now, enrolledSetHash: hash, user: configuration.username)
    }

    func passcodeStep(
        context id: AuthenticationContextID, prompts: PromptChannel, prompt: EvaluationPrompt,
        isCancelled: @escaping @Sendable () -> Bool
    ) async throws -> Credential {
        let conversation = PasscodeConversation(channel: prompts, prompt: prompt, isCancelled: isCancelled)
        try await passcode.authenticate(user: configuration.username, presenter: conversation, isCancelled: isCancelled)
        let (handler, unlockRequested) = state.withLock {
            ($0.passcodeSuccessHandler, $0.records[id]?.unlocksKeychain ?? false)
        }
        if let handler {
            let success = PasscodeSuccess(
                passcode: conversation.typedPasscode.withLock { $0 }, context: id, unlockRequested: unlockRequested,
                conversation: conversation)
            // On a thread of the user's authentications: the handler may ask the user once more (the previous
            // passcode), which blocks.
            try await PasscodeAuthenticator.transactions.run(
                for: PasscodeAuthenticator.TransactionKey.authentication(configuration.username)
            ) { handler(success) }
        }
        return Credential(
            method: .passcode, time: configuration.clock.now(), enrolledSetHash: try? currentStateHash(),
            user: configuration.username)
    }
}
