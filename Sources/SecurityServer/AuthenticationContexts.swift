import Authenticators
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

/// The engine's authentication contexts: the server side of every `LAContext`, the authenticators behind them, and
/// the credentials successful evaluations leave.
///
/// A client holds only an ``AuthenticationContextID`` (32 random bytes); everything else lives here. Evaluations
/// (`AuthenticationContexts+Evaluation`) run their glue on the evaluation executor, their blocking calls on the
/// authenticators' threads, and their prompts go to the client as messages (``PromptChannel``); enrollment is in `+Enrollment`.
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

    struct Record {
        /// The client connection that created the context (0: the engine itself).
        var owner: UInt64 = 0
        var invalidated = false
        var credentials: [AuthenticationMethod: Credential] = [:]
        var applicationPassword: SecureBytes?
        var evaluatedDomainState: Data?
        /// An engine context made to unlock the keychain: its passcode success reaches the keybag even when the
        /// keychain is unlocked already (to re-seal it after a passcode change).
        var unlocksKeychain = false
        /// Why the keychain did not open after this context's passcode success (an explicit unlock reports it).
        var keychainUnlockFailure: String?
        var inFlight: [UInt64: @Sendable () -> Void] = [:]
    }

    struct State {
        var records: [AuthenticationContextID: Record] = [:]
        /// The last fingerprint match, what the reuse window offers, and the context that made it.
        /// The last fingerprint match: when (wall clock, for the credential; seconds since boot, for the reuse window),
        /// the enrolled set's hash then, and the context it was for.
        var lastBiometricSuccess: (time: Date, sinceBoot: TimeInterval, hash: Data?, context: AuthenticationContextID)?
        var nextToken: UInt64 = 0
        var passcodeSuccessHandler: (@Sendable (PasscodeSuccess) -> Void)?
        var passcodeUnusableHandler: (@Sendable () -> Void)?
    }

    let state = Mutex(State())
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
                drivers: configuration.readerDrivers, attemptTimeout: configuration.attemptTimeout,
                backend: configuration.biometryBackend),
            policy: attemptPolicy)
        passcode = PasscodeAuthenticator(configuration: configuration.passcode, policy: attemptPolicy)
    }

    /// Sets what runs after every passcode success (on the PAM thread, so it may ask the user once more): the
    /// engine unlocks the keychain's classes with the passcode.
    package func onPasscodeSuccess(_ handler: @escaping @Sendable (PasscodeSuccess) -> Void) {
        state.withLock { $0.passcodeSuccessHandler = handler }
    }

    /// Sets what runs when PAM's account check says the user can no longer authenticate (unknown, expired or
    /// refused account): the engine destroys the `akpu` class, as Apple does when the passcode is removed.
    package func onPasscodeUnusable(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.passcodeUnusableHandler = handler }
    }

    /// Whether `user`'s passcode can be used now, by PAM's account check; tells the engine when it definitely
    /// cannot.
    func isPasscodeUsable() async throws -> Bool {
        let account = try await passcode.accountState(user: configuration.username)
        if case .unusable = account { state.withLock { $0.passcodeUnusableHandler }?() }
        return account == .usable
    }

    /// Records why the keychain did not open after the passcode success of context `id` (nil: it opened).
    package func setKeychainUnlockFailure(_ message: String?, in id: AuthenticationContextID) {
        state.withLock { $0.records[id]?.keychainUnlockFailure = message }
    }

    /// Why the keychain did not open after the passcode success of context `id`; nil when it did or was not tried.
    package func keychainUnlockFailure(in id: AuthenticationContextID) -> String? {
        state.withLock { $0.records[id]?.keychainUnlockFailure }
    }

    // MARK: Contexts

    /// How many contexts the engine holds, invalidated ones included until their connection ends (diagnostics,
    /// tests).
    package var count: Int { state.withLock { $0.records.count } }

    /// A new context with no credential, belonging to client connection `owner` (0: the engine's own).
    ///
    /// - Parameter unlocksKeychain: an engine context whose passcode evaluation is an explicit unlock of the
    ///   keychain (`PasscodeSuccess.unlockRequested`).
    package func createContext(owner: UInt64 = 0, unlocksKeychain: Bool = false) throws -> AuthenticationContextID {
        let id = AuthenticationContextID(bytes: [UInt8](try SecureRandom.bytes(32)))
        state.withLock { $0.records[id] = Record(owner: owner, unlocksKeychain: unlocksKeychain && owner == 0) }
        return id
    }

    /// Throws `invalidContext` when `id` names a context that another client connection created (a context id is
    /// not a bearer token) or no context at all (so a stranger's `invalidate` of an id it guessed or of a context
    /// already gone does nothing, not even forget the reuse window's match).
    package func requireOwner(_ id: AuthenticationContextID, connection: UInt64) throws {
        let owner = state.withLock { $0.records[id]?.owner }
        guard let owner else { throw AuthenticationError(.invalidContext, "no such authentication context") }
        guard owner == connection else {
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

    func end(_ id: AuthenticationContextID, forgettingMatch: Bool) {
        let cancels = state.withLock { state -> [@Sendable () -> Void] in
            if forgettingMatch && state.lastBiometricSuccess?.context == id { state.lastBiometricSuccess = nil }
            guard var record = state.records[id] else { return [] }
            let cancels = Array(record.inFlight.values)
            // Still its owner's: refused to every other connection, and dropped when the owner's connection ends.
            record = Record(owner: record.owner)
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

    /// The enrolled-set hash recorded by the last successful biometric evaluation or check of this context.
    package func evaluatedDomainState(for id: AuthenticationContextID) throws -> Data? {
        try withRecord(id) { $0.evaluatedDomainState }
    }

    func withRecord<Value>(
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

    func isInvalidated(_ id: AuthenticationContextID) -> Bool {
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
}
