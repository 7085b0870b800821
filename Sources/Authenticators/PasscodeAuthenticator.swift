internal import CPAM
import Foundation
import Logging
import SecureCrypto
import SecurityProtocol
import WorkThreads

/// Checks a user's passcode through the system's PAM stack, under the persisted attempt policy.
///
/// One transaction is `pam_start` (or `pam_start_confdir` when ``Configuration/configurationDirectory`` is set),
/// `pam_authenticate`, then `pam_acct_mgmt`, then `pam_end`. The conversation asks the presenter for every prompt
/// and forwards PAM's messages. `PAM_FAIL_DELAY` is set to a no-op hook: the attempt policy, not a module's fixed
/// 2-second sleep, decides how long a user waits after failures.
///
/// Install `Resources/pam.d/local-authentication` as `/etc/pam.d/local-authentication` to use the default service;
/// it includes the system's `common-auth` and `common-account`, so the passcode is the user's login password.
///
/// Each PAM transaction runs on a thread of its own (``transactions``): one user's transactions one at a time, in
/// order (the attempt policy counts them), at most 16 at once in the process, so a user who never answers a
/// prompt holds up no one else's passcode check.
package struct PasscodeAuthenticator: Sendable {
    /// Which PAM service to run and where its configuration lives.
    package struct Configuration: Sendable {
        /// The PAM service name (the file name under `/etc/pam.d`).
        package var service: String
        /// A directory holding the service file, used with `pam_start_confdir` instead of `/etc/pam.d`; for tests
        /// and private deployments. Its modules must be given by absolute path unless they are system modules.
        package var configurationDirectory: String?

        /// The default service, `local-authentication`, from the system configuration.
        package init(service: String = "local-authentication", configurationDirectory: String? = nil) {
            self.service = service
            self.configurationDirectory = configurationDirectory
        }
    }

    /// Where this process's PAM transactions run: a thread each, one at a time for a user and kind of work
    /// (``TransactionKey``), at most 16 at once.
    package static let transactions = TransactionThreads(name: "la.pam", total: 16)

    /// The key a user's transaction of one kind runs under in ``transactions``: authentications of one user run
    /// one after another (each reserves its attempt right before it runs), account checks beside them.
    package enum TransactionKey {
        /// Authenticating `user`, and what runs as part of it (the success handler's questions).
        package static func authentication(_ user: String) -> String { "authenticate:" + user }
        /// PAM's account check of `user` (nothing is typed).
        package static func account(_ user: String) -> String { "account:" + user }
        /// A question put to `user` outside PAM (an application password).
        package static func question(_ user: String) -> String { "question:" + user }
    }

    private static let logger = Logger(label: "local-authentication.passcode")

    /// The PAM service and configuration directory.
    package let configuration: Configuration
    /// The attempt policy consulted before and updated after each transaction, if any.
    package let policy: AttemptPolicy?

    /// An authenticator for `configuration`. With a `policy`, failures are counted and escalating waits enforced
    /// (and a success clears the biometric lockout); without one, every attempt goes to PAM.
    package init(configuration: Configuration = Configuration(), policy: AttemptPolicy?) {
        self.configuration = configuration
        self.policy = policy
    }

    /// Authenticates `user` through PAM, asking `presenter` for the passcode.
    ///
    /// - Throws: ``AuthenticationError`` with
    ///   - `authenticationFailed`: wrong passcode, unknown user (deliberately not told apart), an account that
    ///     PAM refuses (expired, not allowed; the reason is in the message), or an attempt refused by the policy
    ///     (then ``AuthenticationError/retryAfter`` holds the remaining wait and PAM was not asked);
    ///   - `userCancel`: the presenter returned nil for a prompt;
    ///   - `passcodeNotSet`: the PAM service cannot authenticate anyone (missing or broken configuration).
    package func authenticate(
        user: String, presenter: any PasscodePresenter, isCancelled: @escaping @Sendable () -> Bool = { false }
    ) async throws {
        try policy?.checkPasscodeAllowed()
        let configuration = self.configuration
        let policy = self.policy
        let outcome = try await Self.transactions.run(for: TransactionKey.authentication(user)) {
            guard let policy else {
                return Self.runTransaction(
                    configuration: configuration, user: user, presenter: presenter, authenticate: true)
            }
            // Reserved here, on the transaction's thread, right before it runs: guesses queued behind this one see
            // its count and wait out the delay instead of reaching PAM.
            return try policy.withAttempt(.passcode, isCancelled: isCancelled) {
                let outcome = Self.runTransaction(
                    configuration: configuration, user: user, presenter: presenter, authenticate: true)
                return (outcome, Self.attemptOutcome(of: outcome))
            }
        }
        try settle(outcome, user: user)
    }

    /// What a transaction means for the attempt counters: a presented passcode that PAM refused is a failure;
    /// a cancel, an account PAM will not let in after the right passcode, or a broken stack is not an attempt.
    private static func attemptOutcome(of outcome: Outcome) -> AttemptOutcome {
        if outcome.status == PAM_SUCCESS { return .success }
        if outcome.cancelled { return .notAttempted }
        if outcome.unusableAnswer { return .failure }
        switch (outcome.stage, outcome.status) {
        case (.authenticate, PAM_AUTH_ERR), (.authenticate, PAM_USER_UNKNOWN), (.authenticate, PAM_MAXTRIES),
            (.authenticate, PAM_CRED_INSUFFICIENT), (.authenticate, PAM_CRED_ERR):
            return .failure
        default:
            return .notAttempted
        }
    }

    /// Whether a passcode is set for `user`, by this rule: the PAM service's configuration file exists (in the
    /// configuration directory, or in `/etc/pam.d` or `/usr/lib/pam.d`) and `pam_acct_mgmt` accepts the account
    /// without prompting. It does not reveal the passcode or count as an attempt.
    package func isPasscodeSet(user: String) async throws -> Bool {
        try await accountState(user: user) == .usable
    }

    /// What PAM's account check (`pam_acct_mgmt`, nothing typed) says of `user`'s passcode.
    package enum AccountState: Sendable, Equatable {
        /// The account may authenticate with its passcode.
        case usable
        /// The account can no longer authenticate (unknown to PAM, expired, or refused outright): its passcode is
        /// gone, as when Apple's passcode is removed.
        case unusable(String)
        /// PAM could not say (no service file, a broken stack, a password that must be changed first).
        case unknown(String)
    }

    /// What PAM's account check says of `user`'s passcode: whether it is usable, definitely unusable, or unknown.
    package func accountState(user: String) async throws -> AccountState {
        guard serviceFileExists() else { return .unknown("PAM service '\(configuration.service)' is not installed") }
        let configuration = self.configuration
        let outcome = try await Self.transactions.run(for: TransactionKey.account(user)) {
            Self.runTransaction(
                configuration: configuration, user: user, presenter: RefusingPresenter(), authenticate: false)
        }
        switch (outcome.stage, outcome.status) {
        case (_, PAM_SUCCESS): return .usable
        case (.account, PAM_USER_UNKNOWN), (.account, PAM_ACCT_EXPIRED), (.account, PAM_PERM_DENIED):
            return .unusable(outcome.statusText)
        default: return .unknown(outcome.statusText)
        }
    }

    private func serviceFileExists() -> Bool {
        let candidates =
            if let directory = configuration.configurationDirectory {
                [directory + "/" + configuration.service]
            } else {
                ["/etc/pam.d/" + configuration.service, "/usr/lib/pam.d/" + configuration.service]
            }
        return candidates.contains { FileManager.default.fileExists(atPath: $0) }
    }

    /// What one PAM transaction ended with.
    struct Outcome: Sendable {
        enum Stage: Sendable { case start, authenticate, account }
        var stage: Stage
        var status: Int32
        var statusText: String
        var cancelled: Bool
        var unusableAnswer: Bool
    }

    /// Runs one PAM transaction on the current thread (one of ``transactions``).
    static func runTransaction(
        configuration: Configuration, user: String, presenter: any PasscodePresenter, authenticate: Bool
    ) -> Outcome {
        let state = PAMConversationState(presenter: presenter)
        let appdata = Unmanaged.passRetained(state)
        defer { appdata.release() }
        var conversation = pam_conv(conv: pamConversation, appdata_ptr: appdata.toOpaque())
        var handle: OpaquePointer?
        let started =
            if let directory = configuration.configurationDirectory {
                pam_start_confdir(configuration.service, user, &conversation, directory, &handle)
            } else {
                pam_start(configuration.service, user, &conversation, &handle)
            }
        guard started == PAM_SUCCESS, let handle else {
            return Outcome(
                stage: .start, status: started, statusText: text(of: started, handle), cancelled: false,
                unusableAnswer: false)
        }
        var status = pam_set_item(handle, PAM_FAIL_DELAY, unsafeBitCast(pamNoFailDelay, to: UnsafeRawPointer.self))
        var stage = Outcome.Stage.start
        if status == PAM_SUCCESS && authenticate {
            stage = .authenticate
            status = pam_authenticate(handle, Int32(bitPattern: PAM_DISALLOW_NULL_AUTHTOK))
        }
        if status == PAM_SUCCESS {
            stage = .account
            status = pam_acct_mgmt(handle, 0)
        }
        let outcome = Outcome(
            stage: stage, status: status, statusText: text(of: status, handle), cancelled: state.cancelled,
            unusableAnswer: state.unusableAnswer)
        pam_end(handle, status)
        return outcome
    }

    private static func text(of status: Int32, _ handle: OpaquePointer?) -> String {
        pam_strerror(handle, status).map { String(cString: $0) } ?? "PAM error \(status)"
    }

    /// Maps a transaction's outcome to success or an error (the policy was settled on the PAM thread).
    private func settle(_ outcome: Outcome, user: String) throws {
        let backend = AuthenticationError.BackendStatus(library: "pam", code: Int(outcome.status))
        if outcome.status == PAM_SUCCESS { return }
        if outcome.cancelled {
            throw AuthenticationError(.userCancel, "passcode entry was cancelled", backendStatus: backend)
        }
        if outcome.unusableAnswer {
            // A passcode with a NUL byte cannot be anyone's PAM password: a wrong passcode, counted as such.
            throw AuthenticationError(.authenticationFailed, "the passcode was not accepted", backendStatus: backend)
        }
        switch (outcome.stage, outcome.status) {
        case (.authenticate, PAM_AUTH_ERR), (.authenticate, PAM_USER_UNKNOWN), (.authenticate, PAM_MAXTRIES),
            (.authenticate, PAM_CRED_INSUFFICIENT), (.authenticate, PAM_CRED_ERR):
            Self.logger.debug("passcode rejected", metadata: ["service": "\(configuration.service)"])
            throw AuthenticationError(.authenticationFailed, "the passcode was not accepted", backendStatus: backend)
        case (.account, PAM_ACCT_EXPIRED), (.account, PAM_NEW_AUTHTOK_REQD), (.account, PAM_PERM_DENIED),
            (.account, PAM_AUTHTOK_EXPIRED), (.account, PAM_USER_UNKNOWN), (.account, PAM_AUTH_ERR):
            throw AuthenticationError(
                .authenticationFailed, "the account may not authenticate: \(outcome.statusText)",
                backendStatus: backend)
        case (.authenticate, PAM_ABORT):
            throw AuthenticationError(.systemCancel, "PAM aborted: \(outcome.statusText)", backendStatus: backend)
        default:
            throw AuthenticationError(
                .passcodeNotSet,
                "PAM service '\(configuration.service)' cannot authenticate: \(outcome.statusText)",
                backendStatus: backend)
        }
    }
}

/// The presenter used by ``PasscodeAuthenticator/isPasscodeSet(user:)``: it never answers, so no passcode is read.
private struct RefusingPresenter: PasscodePresenter {
    func answer(_ prompt: PasscodePrompt) -> SecureBytes? { nil }
    func show(_ message: PasscodeMessage) {}
}
