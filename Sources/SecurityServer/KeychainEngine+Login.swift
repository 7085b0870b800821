import Authenticators
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

extension KeychainEngine {
    /// Whether the keychain's `ak` classes are locked.
    package var isLocked: Bool { enclave.isLocked }

    /// Where the store's file stands (``KeychainDatabase/changeStamp()``): which file, and the count of commits to
    /// it by other connections; nil when the file cannot be read.
    package var storeChangeStamp: (file: UInt64, version: Int64)? {
        guard let stamp = try? database.changeStamp() else { return nil }
        return (stamp.file, stamp.version)
    }

    /// Locks the `ak` classes (`ak`, `aku`, `akpu`) and tells subscribers. In localauthd, within 48 hours of a
    /// passcode unlock, their keys stay in the daemon sealed for a fingerprint unlock (``FingerprintUnlockWindow``).
    ///
    /// - Throws: `EnclaveError` when the state file cannot be written.
    package func lockKeychain() throws {
        if let keys = enclave.unlockedClassKeysHeldInProcess() { fingerprintWindow.keep(keys, at: clock.sinceBoot()) }
        try enclave.lock()
        hub.emit([EngineEvent(kind: .locked)])
    }

    /// Unlocks the keychain with a password the caller already holds instead of asking for it: the login password
    /// the PAM module passes at `open_session` and `chauthtok`. PAM checks it through the engine's own service (as
    /// if the user had typed it, under the same attempt policy) before it opens anything; `previous` answers the
    /// question the engine asks when the keychain is sealed under an earlier password (a password change), so the
    /// keychain is re-sealed under `password`.
    ///
    /// - Returns: nil when the keychain is unlocked, else why not (never a secret).
    package func unlock(
        withPassword password: SecureBytes, previous: SecureBytes? = nil, caller: CallerIdentity
    ) async -> String? {
        let channel = PromptChannel.answering([password] + (previous.map { [$0] } ?? []))
        defer { channel.close() }
        let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "Unlock the login keychain"))
        do {
            _ = try await handle(.unlockWithPasscode(options), caller: caller, prompts: channel)
            return nil
        } catch let error as AuthenticationError {
            return error.message
        } catch {
            return "the keychain cannot be unlocked"
        }
    }

    /// Unlocks with an enrolled finger the keys a lock kept in this daemon (``FingerprintUnlockWindow``).
    ///
    /// - Throws: `AuthenticationError`: `biometryNotAvailable` when no fingerprint unlock is possible now (not
    ///   localauthd, no passcode unlock within 48 hours in this daemon's lifetime, nothing kept, or not locked: an
    ///   explicit unlock of an unlocked keychain goes on to the passcode, which checks its sealing), or the
    ///   evaluation's failure (after 5 failed scans, biometry locks out and the kept keys are dropped: only the
    ///   passcode unlocks).
    func unlockWithFingerprint(
        _ contexts: AuthenticationContexts, options: EvaluationOptions, prompts: PromptChannel?
    ) async throws {
        if (try? contexts.attemptPolicy.checkBiometryAllowed()) == nil { fingerprintWindow.close() }
        guard fingerprintWindow.canUnlock(at: clock.sinceBoot()) else {
            throw AuthenticationError(
                .biometryNotAvailable,
                "a fingerprint unlocks the keychain only in localauthd, within 48 hours of an unlock by passcode since it started, and before 5 failed scans: use the passcode"
            )
        }
        let id = try contexts.createContext()
        defer { contexts.discard(id) }
        guard try await evaluateFinger(contexts, context: id, options: options, prompts: prompts) else {
            throw AuthenticationError(.biometryNotAvailable, "the fingerprint unlock expired: use the passcode")
        }
    }

    /// Evaluates an enrolled finger in context `id` and, after a match, opens the keychain with the keys the last
    /// lock kept for a fingerprint unlock, if there are any (``FingerprintUnlockWindow``: within 48 hours of a
    /// passcode unlock, before 5 failed scans).
    ///
    /// - Returns: whether the match opened the keychain.
    /// - Throws: the evaluation's failure (after 5 failed scans, biometry locks out and the kept keys are dropped).
    func evaluateFinger(
        _ contexts: AuthenticationContexts, context id: AuthenticationContextID, options: EvaluationOptions,
        prompts: PromptChannel?
    ) async throws -> Bool {
        if (try? contexts.attemptPolicy.checkBiometryAllowed()) == nil { fingerprintWindow.close() }
        do {
            _ = try await contexts.evaluate(.biometrics, context: id, options: options, prompts: prompts)
        } catch {
            if (try? contexts.attemptPolicy.checkBiometryAllowed()) == nil { fingerprintWindow.close() }
            throw error
        }
        return try unlockWithKeptKeys()
    }

    /// Opens the keychain with the keys the last lock kept for a fingerprint unlock, if there are any. Only after
    /// a finger matched: an evaluation in this engine (``evaluateFinger(_:context:options:prompts:)``), or the login
    /// whose `pam_localauth.so finger` prompt took a finger moments before (localauthd's login sessions keep that
    /// match, for the program that runs the stack as root, until its session opens).
    ///
    /// - Returns: whether it opened the keychain (false: nothing kept, the window closed, or locked out).
    package func unlockWithKeptKeys() throws -> Bool {
        if let contexts = authentication, (try? contexts.attemptPolicy.checkBiometryAllowed()) == nil {
            fingerprintWindow.close()
        }
        guard let keys = fingerprintWindow.release(at: clock.sinceBoot()) else { return false }
        do {
            try enclave.restoreUnlockedClassKeys(keys)
        } catch {
            throw AuthenticationError(.invalidContext, "the kept keys do not open the keychain")
        }
        hub.emit([EngineEvent(kind: .unlocked)])
        return true
    }
}

extension PromptChannel {
    /// A channel that answers the questions PAM asks without echo from `secrets`, in order (the first for PAM's
    /// password question, the next for the engine's question about an earlier password), and every other question
    /// with nothing: nobody is there to ask.
    static func answering(_ secrets: [SecureBytes]) -> PromptChannel {
        final class Reference: @unchecked Sendable {
            // Safe to share: set once, before the channel is used, and only read afterwards.
            weak var channel: PromptChannel?
        }
        let reference = Reference()
        let remaining = Mutex(secrets)
        let channel = PromptChannel(request: 0) { event in
            guard case .question(let number, _, let question, let isApplicationPassword) = event.kind else { return }
            let answer =
                question.echo || isApplicationPassword
                ? nil : remaining.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            reference.channel?.receive(PromptAnswer(request: 0, .answer(question: number, answer)))
        }
        reference.channel = channel
        return channel
    }
}
