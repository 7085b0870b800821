import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// The keychain engine: the only code that reads or writes keychain state. It applies Keychain Services' rules
/// (classes, primary keys, access groups, protection classes, synchronizable, access control) to requests and
/// keeps items in an encrypted `KeychainDatabase` with keys from the `Enclave`.
///
/// Thread-safe: requests may arrive from any thread; each writes in one SQLite transaction, so a failed request
/// changes nothing, and prompts run with no transaction open (``withAuthorizations(_:)``). The keychain operations
/// live in `KeychainEngine+Add`, `+CopyMatching`, `+Update`, `+Delete`, `+Matching`, `+Rules`, `+Authorization`,
/// `+Trust` and `+Backup`; authentication, administration, login and widening in `+Authentication`,
/// `+Administration`, `+Login` and `+Widening`; key requests in `KeyEngine.swift`.
package final class KeychainEngine: Sendable {
    /// The store directory (0700).
    package let directory: URL
    let enclave: Enclave
    let database: KeychainDatabase
    let sealer: ItemSealer
    let evaluator: any AccessControlEvaluator
    /// The authentication contexts (`LAContext`s) this engine serves, when it was given authenticators.
    package let authentication: AuthenticationContexts?
    let hub = EngineEventHub()
    /// The passcode classes' keys kept after a lock for a fingerprint unlock (localauthd only).
    let fingerprintWindow = FingerprintUnlockWindow()
    /// The clock of the fingerprint window (the authentication configuration's; tests move it by hand).
    let clock: any AttemptClock

    /// Opens (creating on first use) the store in `directory`.
    ///
    /// - Parameters:
    ///   - evaluator: decides access-control lists; by default the credentials of the authentication contexts,
    ///     or, without contexts, nothing satisfies a list.
    ///   - authentication: how the authenticators behind `LAContext` are set up; their attempt counters are
    ///     authenticated under this store's keybag. A passcode success through them also unlocks the keychain's
    ///     classes and records that a passcode is set.
    ///   - enclave: the backend for a new store and the TPM a sealed store needs; by default the embedded
    ///     client's configuration (`LA_ENCLAVE`, `LA_TPM_TCTI`, `client.conf`).
    /// - Throws: `KeychainStatus` (`errSecIO`, `errSecDecode`; `errSecNotAvailable` when the store's TPM is not
    ///   configured or does not answer) when the files cannot be created or opened.
    package init(
        directory: URL, evaluator: (any AccessControlEvaluator)? = nil,
        authentication configuration: AuthenticationConfiguration? = nil,
        enclave enclaveConfiguration: EnclaveConfiguration? = nil
    ) throws {
        self.directory = directory
        do {
            enclave = try Enclave(directory: directory, configuration: enclaveConfiguration)
            database = try KeychainDatabase(directory: directory)
        } catch {
            throw Self.status(error)
        }
        let enclave = self.enclave
        let authentication: AuthenticationContexts?
        if let configuration {
            do {
                let policy = try AttemptPolicy(
                    directory: configuration.stateDirectory, integrityKey: enclave.attemptKey,
                    mayStartFresh: enclave.attemptKeyIsNew, clock: configuration.clock)
                authentication = try AuthenticationContexts(configuration: configuration, attemptPolicy: policy)
            } catch {
                throw KeychainStatus(.io, "the authentication state cannot be opened")
            }
        } else {
            authentication = nil
        }
        sealer = ItemSealer(enclave: enclave)
        self.authentication = authentication
        let clock = configuration?.clock ?? SystemAttemptClock()
        self.clock = clock
        let fingerprintWindow = self.fingerprintWindow
        self.evaluator =
            evaluator ?? authentication.map { ContextAccessControlEvaluator(contexts: $0) } ?? NoCredentialEvaluator()
        let hub = self.hub
        let database = self.database
        let sealer = self.sealer
        // The contexts hold this handler: they are held weakly here, or neither would ever be freed (nor the
        // database closed).
        authentication?.onPasscodeSuccess { [weak authentication] success in
            // Every passcode success that leaves the keychain unlocked in this process (localauthd) opens the
            // fingerprint window anew for 48 hours.
            defer {
                if enclave.unlockedClassKeysHeldInProcess() != nil {
                    fingerprintWindow.passcodeUnlocked(at: clock.sinceBoot())
                }
            }
            // A verified passcode is proof that one is set, for kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly.
            if !enclave.isPasscodeSet { try? enclave.setPasscodeSet(true) }
            let wasLocked = enclave.isLocked
            // The first passcode success also seals the passcode classes under the passcode (see Enclave); an
            // explicit unlock checks the sealing even when unlocked (the passcode may have changed since).
            guard
                wasLocked || !enclave.isPasscodeProtected || success.unlockRequested
                    || enclave.needsPasscodeSetClassKey
            else { return }
            let failure: String? =
                if let passcode = success.passcode {
                    Self.unlock(enclave, with: passcode, success)
                } else {
                    (try? enclave.unlock()) == nil
                        ? "the keychain is sealed under the passcode, which PAM did not ask" : nil
                }
            authentication?.setKeychainUnlockFailure(failure, in: success.context)
            if failure == nil && wasLocked {
                hub.emit([EngineEvent(kind: .unlocked)])
                Self.resealLegacyRows(database: database, sealer: sealer, enclave: enclave)
            }
        }
        // PAM says the account can no longer authenticate: its passcode is gone, and with it every akpu item.
        authentication?.onPasscodeUnusable { [weak self] in
            guard let self, enclave.isPasscodeSet else { return }
            try? setPasscodeSet(false)
        }
        Self.resealLegacyRows(database: database, sealer: sealer, enclave: enclave)
    }

    /// Unlocks the passcode classes with the passcode PAM accepted. When they were sealed under another passcode
    /// (the account's passcode was changed with `passwd` since), asks the user once for the previous one and
    /// re-seals them under the new one, as macOS does for the login keychain. Failures leave the keychain as it
    /// was and are told to the user, never thrown: the authentication itself succeeded.
    ///
    /// - Returns: nil when the keychain opened, else why not (for an explicit unlock to report).
    static func unlock(_ enclave: Enclave, with passcode: SecureBytes, _ success: PasscodeSuccess) -> String? {
        var failure: String
        do {
            try enclave.unlock(passcode: passcode)
            return nil
        } catch EnclaveError.Code.wrongPassword {
            if let previous = success.askPreviousPasscode() {
                do {
                    try enclave.changePasscode(from: previous, to: passcode)
                    success.show("The keychain is sealed under your new passcode now.", isError: false)
                    return nil
                } catch let error as EnclaveError {
                    failure = error.message
                } catch {
                    failure = "the keychain cannot be re-sealed"
                }
            } else {
                failure = "it is sealed under your previous passcode"
            }
        } catch let error as EnclaveError {
            failure = error.message
        } catch {
            failure = "the keychain cannot be opened"
        }
        success.show("The keychain stays locked: \(failure).", isError: true)
        return failure
    }

    /// Re-seals the rows sealed before generations existed, whose class key is available now, so each part of
    /// them is bound to the others and to a version (a row updated before this release could otherwise take back
    /// an earlier attributes blob). Rows of a locked class wait for the next unlock; a row that does not open is
    /// left as it is (reading it reports `errSecDecode`).
    static func resealLegacyRows(database: KeychainDatabase, sealer: ItemSealer, enclave: Enclave) {
        // A read first (an index lookup): opening a store must not take SQLite's write lock when there is nothing
        // to re-seal, which is every open after the first.
        guard (try? database.read({ try $0.legacyItems().isEmpty })) == false else { return }
        _ = try? database.write { transaction in
            for row in try transaction.legacyItems() {
                guard let protectionClass = ProtectionClass(rawValue: row.protectionClass),
                    enclave.isAvailable(protectionClass),
                    let item = try? sealer.open(row),
                    let sealedValue = try transaction.value(rowID: row.rowID),
                    let data = try? sealer.openData(item, sealedValue: sealedValue)
                else { continue }
                try transaction.update(
                    try sealer.seal(row, attributes: item.attributes, data: data, protectionClass: protectionClass))
            }
        }
    }

    /// Serves one request for `caller`, asking the user through `prompting` when an item's access control needs
    /// an authentication. Blocks the calling thread meanwhile: call it from a thread that may wait (never Swift's
    /// cooperative pool).
    ///
    /// - Throws: `KeychainStatus` with the `OSStatus` Keychain Services returns.
    package func handle(
        _ request: KeychainRequest, caller: CallerIdentity, prompting: Prompting = .none
    ) throws -> KeychainResponse {
        try handle(request, caller: caller) { prompting }
    }

    /// ``handle(_:caller:prompting:)``, with the prompting made only when the request may need it: a lookup the hot
    /// path answers never prompts, so an embedded client sets up no prompt channel for it.
    package func handle(
        _ request: KeychainRequest, caller: CallerIdentity, prompting: () -> Prompting
    ) throws -> KeychainResponse {
        do {
            switch request {
            case .add(let attributes):
                return try add(parse(attributes, for: .add, caller: caller, prompting: prompting()), caller: caller)
                    .map(KeychainResponse.items) ?? .success
            case .copyMatching(let query):
                let direct = try directLookup(query, caller: caller)
                if case .answered(let results) = direct { return .items(results) }
                return .items(
                    try copyMatching(
                        parse(query, for: .copyMatching, caller: caller, prompting: prompting()), caller: caller,
                        direct: direct == .notTaken))
            case .update(let query, let attributes):
                try update(
                    parse(query, for: .update, caller: caller, prompting: prompting()), changes: attributes,
                    caller: caller)
                return .success
            case .delete(let query):
                try delete(parse(query, for: .delete, caller: caller, prompting: prompting()), caller: caller)
                return .success
            case .lock:
                try lockKeychain()
                return .success
            case .lockState:
                return .locked(enclave.isLocked)
            case .sealingState:
                return .sealedUnderPasscode(enclave.isPasscodeProtected)
            case .exportBackup(let password):
                let (contents, count, skipped) = try exportBackup(password: password, caller: caller)
                return .exportedBackup(contents, count: count, skipped: skipped)
            case .importBackup(let contents, let password):
                let (count, skipped) = try importBackup(contents, password: password, caller: caller)
                return .backup(count: count, skipped: skipped)
            case .checkStore:
                return .storeCheck(try checkStore(caller: caller))
            case .restoreBackup(let contents, let password):
                let (count, skipped, aside) = try restoreBackup(contents, password: password, caller: caller)
                return .restoredBackup(count: count, skipped: skipped, setAside: aside)
            }
        } catch {
            throw Self.status(error)
        }
    }

    /// The query in `dictionary`, whose authentication context (if any) must be the caller connection's, asking
    /// the user through `prompting` (with the query's `kSecUseOperationPrompt` as the reason, when it has one).
    func parse(
        _ dictionary: [String: KeychainValue], for operation: ItemQuery.Operation, caller: CallerIdentity,
        prompting: Prompting = .none
    ) throws -> ItemQuery {
        var query = try ItemQuery.parse(dictionary, for: operation)
        try requireOwnContext(query.authenticationContext, caller: caller)
        query.prompting = prompting
        if let reason = query.operationPrompt { query.prompting.options.prompt.reason = reason }
        // Refused before anything is read: a prompt would show what the program drew with such text.
        if let problem = query.prompting.options.prompt.unshowableText {
            throw KeychainStatus(.param, "kSecUseOperationPrompt or the context's prompt was refused: \(problem)")
        }
        return query
    }

    /// Throws `errSecAuthFailed` when `context` belongs to another client connection.
    func requireOwnContext(_ context: AuthenticationContextID?, caller: CallerIdentity) throws {
        guard let context, let authentication else { return }
        do {
            try authentication.requireOwner(context, connection: caller.connection)
        } catch {
            throw KeychainStatus(.authFailed, "the authentication context belongs to another client")
        }
    }

    /// Events `caller` may see (items in its access groups, lock and unlock), from now on, in this process.
    package func events(for caller: CallerIdentity) -> AsyncStream<EngineEvent> {
        hub.subscribe(caller)
    }

    func hubEmit(_ events: [EngineEvent]) { hub.emit(events) }

    /// Records whether a passcode is set. Turning it off deletes every `akpu` item and destroys the class's key (so
    /// no older copy of the database opens them either), as Apple does.
    func setPasscodeSet(_ isSet: Bool) throws {
        do {
            if !isSet {
                let events = try database.write { transaction in
                    var events: [EngineEvent] = []
                    for row in try transaction.allItems()
                    where row.protectionClass == ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue {
                        try transaction.delete(rowID: row.rowID)
                        events.append(event(.deleted, row))
                    }
                    return events
                }
                hub.emit(events)
                try enclave.destroyPasscodeSetClassKey()
            }
            try enclave.setPasscodeSet(isSet)
        } catch {
            throw Self.status(error)
        }
    }

    static func status(_ error: any Error) -> KeychainStatus {
        switch error {
        case let status as KeychainStatus: return status
        case StoreError.Code.duplicate: return KeychainStatus(.duplicateItem, "an item with this primary key exists")
        // A damaged file is errSecNotAvailable, and a read-only one errSecReadOnly, as Apple's SecItem maps
        // SQLITE_CORRUPT and SQLITE_READONLY (osstatus_for_s3e); the message names the file.
        case let error as StoreError where error.code == .corrupt:
            return KeychainStatus(.notAvailable, "\(error.message); `lactl keychain check` describes the damage")
        case let error as StoreError where error.code == .readOnly: return KeychainStatus(.readOnly, error.message)
        case StoreError.Code.diskFull: return KeychainStatus(.diskFull, "the disk is full")
        case let error as StoreError where error.code == .io: return KeychainStatus(.io, error.message)
        case EnclaveError.Code.locked: return KeychainStatus(.interactionNotAllowed, "the keychain is locked")
        case EnclaveError.Code.passcodeNotSet:
            return KeychainStatus(.authFailed, "this protection class needs a passcode and none is set")
        case let error as EnclaveError where error.code == .corrupt:
            return KeychainStatus(.decode, "a key does not authenticate: \(error.message)")
        case let error as EnclaveError where error.code == .configuration:
            return KeychainStatus(.notAvailable, error.message)
        case EnclaveError.Code.wrongPassword:
            return KeychainStatus(.authFailed, "the application password does not open the key")
        case let error as EnclaveError where error.code == .io:
            return KeychainStatus(.io, "the key files cannot be read or written: \(error.message)")
        case let error as EnclaveError where error.code == .notAttestable:
            return KeychainStatus(.unimplemented, error.message)
        case let error as EnclaveError where error.code == .invalidChallenge:
            return KeychainStatus(.param, error.message)
        case CryptoError.Code.authenticationFailure:
            return KeychainStatus(.decode, "a ciphertext does not authenticate")
        default: return KeychainStatus(.internalComponent, "internal failure")
        }
    }
}
