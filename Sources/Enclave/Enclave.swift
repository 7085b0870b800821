import Foundation
import SecureCrypto
import StoreFiles
import Synchronization
import TrustedPlatform

/// The enclave of one store directory, on the software or the TPM backend: the device root key, the protection-class
/// keys it wraps, the metadata and index keys, and the keybag's lock state.
///
/// Files (all 0600, in the 0700 store directory): `device.key` (the 256-bit root key, created with the keybag and
/// never again: a missing root key beside an existing keybag is an error, not a reason to make a new one; a key file
/// that others can read, that belongs to another user or that is all zeros is refused) or, on the TPM backend,
/// `device.tpm` (the same key sealed to the TPM, see `RootKeyStore`), `keybag` (every other key,
/// each AES-256-GCM-sealed under the root key with its name and the keybag's version as associated data) and
/// `keybag.state` (locked or not, the boot in which the last unlock happened, whether a passcode is set; a state
/// file that is missing beside an existing keybag, or does not decode, reads as locked).
///
/// Class keys are in memory only while their class is available: `ak`/`aku`/`akpu` while unlocked, `ck`/`cku` once
/// an unlock has happened in this boot (`/proc/sys/kernel/random/boot_id`), `dk`/`dku` always.
///
/// From its first unlock by passcode on, a store is **protected** (keybag version 3, `PasscodeProtection`): the
/// `ak`…`cku` keys are sealed under the root key *and* the passcode, and the keybag holds them no other way.
/// Unlocking puts them where `EnclaveConfiguration.unlockedKeys` says (the kernel keyring for embedded clients,
/// localauthd's memory), locking removes the `ak` ones; "locked" is their absence, so no state file can unlock.
/// Before that first unlock (a new store), the lock state is the state file's flag, shared by every process that
/// opens the directory and re-read whenever it changes, and it protects nothing against someone who can write it.
package final class Enclave: Sendable {
    /// The key that seals item attributes (cached in memory as Apple's metadata key is).
    package let metadataKey: SecureBytes
    /// The key of the blind index (HMAC-SHA256 over an item's primary key).
    package let indexKey: SecureBytes
    /// `indexKey` prepared once for the HMAC of every lookup.
    package let indexMAC: HMACSHA256.Key
    /// The key that authenticates the authenticators' attempt counters (`AttemptPolicy`).
    package let attemptKey: SecureBytes
    /// Whether `attemptKey` was made by this open (a new store, or one from before the key existed): only then
    /// may a missing attempt-counter file mean "no failures yet".
    package let attemptKeyIsNew: Bool

    /// Where the root key lives and enclave P-256 keys are used.
    package var backend: EnclaveBackend { rootKeys.backend }
    /// The key that derives TPM-held keys' authorization values from their access-control lists (HKDF of the
    /// metadata key): a changed list gives a value the TPM refuses.
    let keyAuthorizationKey: SecureBytes

    let directory: URL
    let rootKeys: RootKeyStore
    /// Enclave keys opened recently (see `EnclaveKey.swift`).
    let keyCache = EnclaveKeyCache()
    /// Passcodes the TPM already refused for this keybag (``RefusedAuthorizations``).
    let refusedAuthorizations = RefusedAuthorizations()
    let statePath: String
    let keybagPath: String
    let bootID: String
    /// Where a protected store's unlocked keys are (named by this store's identity).
    let unlockedKeys: any UnlockedKeyStore
    let state: Mutex<State>

    struct State {
        var persisted: PersistedState
        var stamp: FileStamp?
        var classKeys: [ProtectionClass: SecureBytes] = [:]
        /// The class keys the keybag seals under the root key alone: every class before the store is protected,
        /// `dk`/`dku` after.
        var wrappedClassKeys: [ProtectionClass: Data]
        /// The passcode layer, once the store is protected.
        var protection: PasscodeProtection?
        /// The keybag file as last read (a migration by another process rewrites it).
        var keybagStamp: FileStamp?
        /// The state file as last read, held open (see `refresh`).
        var stateFile: OpenFile?
        /// A decryption context per class, keyed with the class key last used: row keys open without a key schedule
        /// each. Dropped when the keychain locks or a class key cannot be had; checked against the current key on
        /// each use.
        var openers: [ProtectionClass: AESGCM.Opener] = [:]
    }

    struct PersistedState: Codable, Equatable {
        var locked: Bool
        var unlockBootID: String?
        var passcodeSet: Bool
    }

    struct FileStamp: Equatable {
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int

        init(_ info: stat) {
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            seconds = info.st_mtim.tv_sec
            nanoseconds = info.st_mtim.tv_nsec
        }
    }

    /// A file held open by descriptor, to tell cheaply whether it is still the one under its name.
    final class OpenFile: Sendable {
        private let descriptor: Int32

        /// `path` opened for reading (not through a symbolic link); nil when it cannot be.
        init?(_ path: String) {
            descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else { return nil }
        }

        deinit { close(descriptor) }

        /// The file's stamp while it still has a name (nil once it was deleted or another file was renamed over it).
        var linkedStamp: FileStamp? {
            var info = stat()
            guard fstat(descriptor, &info) == 0, info.st_nlink > 0 else { return nil }
            return FileStamp(info)
        }
    }

    static let keyByteCount = 32
    static let keyNames = ProtectionClass.allCases.map(\.rawValue) + ["metadata", "index", "attempts", "store-id"]
    /// The keybag format: version 2 binds the version into every entry, so an entry can never be read as one of an
    /// older keybag (which would let the attempt key be dropped and made afresh); version 3 adds the passcode layer
    /// (and two-byte entry sizes) and holds the passcode classes' keys only under it.
    static let keybagVersion = 3

    /// Opens the key store in `directory`, creating the directory (0700), the root key and the keybag on first use.
    ///
    /// Opening while the keybag is not locked counts as an unlock in this boot: the embedded store has no passcode
    /// yet, so the first open after boot is what makes `ck` items available.
    ///
    /// - Parameter configuration: the backend for a new store, and the TPM a sealed store needs (see
    ///   `EnclaveConfiguration`); by default the embedded client's configuration.
    /// - Throws: `EnclaveError.io` when the files cannot be created or read, `.corrupt` when they do not open,
    ///   `.configuration` when the store's TPM is not configured or does not answer.
    package init(directory: URL, configuration: EnclaveConfiguration? = nil) throws {
        self.directory = directory
        statePath = directory.appendingPathComponent("keybag.state").path
        try Self.createPrivateDirectory(directory)
        bootID = Self.currentBootID()
        let lock = try Self.files { try FileLock(path: directory.appendingPathComponent("enclave.lock").path) }
        defer { lock.unlock() }

        keybagPath = directory.appendingPathComponent("keybag").path
        let keybagExists = PrivateFiles.exists(keybagPath)
        let configuration = try configuration ?? .embedded()
        let (rootKeys, rootKey) = try RootKeyStore.open(
            in: directory, configuration: configuration, mayCreate: !keybagExists)
        self.rootKeys = rootKeys
        var wrapped: [String: Data]
        var attemptKeyIsNew = false
        if keybagExists {
            let (version, entries) = try Self.decodeKeybag(try Self.readFile(keybagPath))
            wrapped = entries
            if version < Self.keybagVersion {
                // An older keybag: re-seal every key under the current version, adding the attempt key (version 1
                // had none) and the store's identity.
                let expected = Set(Self.keyNames.filter { $0 != "store-id" && (version > 1 || $0 != "attempts") })
                guard Set(wrapped.keys) == expected else {
                    throw EnclaveError(.corrupt, "the keybag does not hold every key")
                }
                var upgraded: [String: Data] = [:]
                for (name, entry) in wrapped {
                    let key = try Self.unwrap(entry, name: name, version: version, rootKey: rootKey)
                    upgraded[name] = try Self.seal(key, name: name, rootKey: rootKey)
                }
                for name in ["attempts", "store-id"] where upgraded[name] == nil {
                    upgraded[name] = try Self.seal(
                        try SecureBytes(randomCount: Self.keyByteCount), name: name, rootKey: rootKey)
                    if name == "attempts" { attemptKeyIsNew = true }
                }
                try Self.writeFileAtomically(Self.encodeKeybag(upgraded), to: keybagPath)
                wrapped = upgraded
            }
        } else {
            wrapped = [:]
            for name in Self.keyNames {
                wrapped[name] = try Self.seal(
                    try SecureBytes(randomCount: Self.keyByteCount), name: name, rootKey: rootKey)
            }
            // The new store's state first, the keybag last: a process that dies between the two leaves a store
            // that opens unlocked, not an existing keybag without a state, which counts as damage (locked).
            try Self.writeFileAtomically(
                JSONEncoder().encode(PersistedState(locked: false, unlockBootID: bootID, passcodeSet: false)),
                to: statePath)
            try Self.writeFileAtomically(Self.encodeKeybag(wrapped), to: keybagPath)
            // Fault injection for the tests of the paragraph above: the process ends as if killed here.
            if ProcessInfo.processInfo.environment["LA_TEST_END_AFTER"] == "new-keybag" { _exit(75) }
            attemptKeyIsNew = true
        }
        let protection = try PasscodeProtection(entries: wrapped)
        try Self.checkEntries(wrapped, protected: protection != nil)
        metadataKey = try Self.unwrap(wrapped["metadata"]!, name: "metadata", rootKey: rootKey)
        keyAuthorizationKey = try HKDFSHA256.deriveKey(
            inputKeyMaterial: metadataKey, info: Data("la.enclave-key.tpm-authorization.v1".utf8), outputByteCount: 32)
        indexKey = try Self.unwrap(wrapped["index"]!, name: "index", rootKey: rootKey)
        indexMAC = HMACSHA256.Key(indexKey)
        attemptKey = try Self.unwrap(wrapped["attempts"]!, name: "attempts", rootKey: rootKey)
        self.attemptKeyIsNew = attemptKeyIsNew
        let storeID = try Self.unwrap(wrapped["store-id"]!, name: "store-id", rootKey: rootKey)
        switch configuration.unlockedKeys {
        case .processMemory: unlockedKeys = ProcessMemoryKeys()
        case .kernelKeyring:
            unlockedKeys = KernelKeyringKeys(storeIdentity: try Self.identity(of: directory, id: storeID))
        }
        var classKeys: [ProtectionClass: Data] = [:]
        for protectionClass in ProtectionClass.allCases {
            classKeys[protectionClass] = wrapped[protectionClass.rawValue]
        }

        // A new store starts unlocked (the embedded store has no passcode of its own yet); an existing store whose
        // state file is missing or damaged is locked: damage never opens anything.
        let lockedState = PersistedState(locked: true, unlockBootID: nil, passcodeSet: false)
        let statePath = self.statePath
        let stored = try Self.files { try PrivateFiles.read(statePath) }.flatMap {
            try? JSONDecoder().decode(PersistedState.self, from: $0)
        }
        var persisted =
            stored
            ?? (keybagExists ? lockedState : PersistedState(locked: false, unlockBootID: nil, passcodeSet: false))
        if !persisted.locked && persisted.unlockBootID != bootID {
            persisted.unlockBootID = bootID
        }
        if persisted != stored {
            try Self.writeFileAtomically(JSONEncoder().encode(persisted), to: statePath)
        }
        state = Mutex(
            State(
                persisted: persisted, stamp: nil, wrappedClassKeys: classKeys, protection: protection,
                keybagStamp: Self.stamp(of: keybagPath)))
        try state.withLock { state in try refresh(&state) }
    }

    // MARK: Lock state

    /// Whether the keybag is locked (as every process sharing the directory sees it): for a protected store,
    /// whether the unlocked keys are absent.
    package var isLocked: Bool {
        (try? state.withLock { state in
            try refresh(&state)
            if state.protection != nil { return unlockedKeys.read(.unlocked) == nil }
            return state.persisted.locked
        }) ?? true
    }

    /// Whether the store's passcode classes are sealed under the passcode (it was unlocked by passcode once).
    package var isPasscodeProtected: Bool {
        (try? state.withLock { state in
            try refresh(&state); return state.protection != nil
        }) ?? false
    }

    /// Whether a passcode is set (needed for `akpu` items).
    package var isPasscodeSet: Bool {
        (try? state.withLock { state in
            try refresh(&state); return state.persisted.passcodeSet
        }) ?? false
    }

    /// Locks the keybag: `ak`, `aku` and `akpu` keys leave memory here and in every process that shares the store
    /// (for a protected store: they leave the kernel keyring or the daemon, and only the passcode brings them back).
    package func lock() throws {
        try updateState { $0.locked = true }
        unlockedKeys.remove(.unlocked)
        state.withLock { $0.openers = [:] }
        // The pooled contexts are wiped when returned; freeing them leaves not even the all-zero key's schedule.
        AESGCM.discardIdleContexts()
    }

    /// The passcode classes' unlocked keys, when this process holds them (localauthd, a protected store, unlocked):
    /// what the daemon keeps, wrapped, for a fingerprint unlock after a lock. Nil otherwise: embedded clients share
    /// them through the kernel keyring, where no fingerprint could guard them.
    package func unlockedClassKeysHeldInProcess() -> SecureBytes? {
        guard unlockedKeys is ProcessMemoryKeys, isPasscodeProtected else { return nil }
        return unlockedKeys.read(.unlocked)
    }

    /// Puts back keys that ``unlockedClassKeysHeldInProcess()`` returned (after a fingerprint match), and marks the
    /// store unlocked. The caller decides that the user may have them.
    ///
    /// - Throws: `EnclaveError.corrupt` when the keys are not the passcode classes' keys of a protected store, `.io`
    ///   for the state file.
    package func restoreUnlockedClassKeys(_ keys: SecureBytes) throws {
        try changingState { state in
            guard state.protection != nil, unlockedKeys is ProcessMemoryKeys,
                keys.count == PasscodeProtection.classes(in: .unlocked).count * Self.keyByteCount
            else { throw EnclaveError(.corrupt, "these are not the keychain's unlocked class keys") }
            try unlockedKeys.store(keys, in: .unlocked)
            state.persisted.locked = false
            state.persisted.unlockBootID = bootID
        }
    }

    /// Removes this store's unlocked keys from where they are kept (for an embedded store, the user's kernel
    /// keyring), leaving its lock state alone: for a store about to be deleted, whose keys would otherwise stay in
    /// the keyring, counting against the user's quota (200 keys for a user other than root), until the user's last
    /// process ends.
    package func forgetUnlockedKeys() {
        for slot in UnlockedSlot.allCases { unlockedKeys.remove(slot) }
    }

    /// Unlocks a store that is not passcode-protected yet and records this boot as one with an unlock (making
    /// `ck`/`cku` available until reboot). The caller must have authenticated the user; the engine decides that.
    ///
    /// - Throws: `EnclaveError.locked` for a protected store: only `unlock(passcode:)` opens it.
    package func unlock() throws {
        guard !isPasscodeProtected else {
            throw EnclaveError(.locked, "the keychain is sealed under the passcode; only the passcode unlocks it")
        }
        try updateState {
            $0.locked = false
            $0.unlockBootID = bootID
        }
    }

    /// Unlocks with the passcode PAM has just accepted: opens the passcode classes' keys and puts them where
    /// unlocked keys are kept. A store that is not protected yet becomes protected now: its passcode classes are
    /// sealed under the passcode and the root key, and the keybag keeps them no other way from now on. A destroyed
    /// `akpu` key is made afresh (a passcode is in use again), and a store whose root key moved into a TPM after it
    /// was protected has its passcode layer sealed to the TPM too.
    ///
    /// - Throws: `EnclaveError.wrongPassword` when the keychain was sealed under another passcode (the account's
    ///   passcode changed since: see `changePasscode`), `.lockedOut` when the TPM refuses passcode guesses for now,
    ///   `.io` / `.corrupt` for the files.
    package func unlock(passcode: SecureBytes) throws {
        try changingKeybag { state, rootKey in
            let keys: [ProtectionClass: SecureBytes]
            if let protection = state.protection {
                var (opened, wrappingKey) = try protection.open(
                    passcode: passcode, rootKey: rootKey, tpm: tpm, refused: refusedAuthorizations)
                if opened[.whenPasscodeSetThisDeviceOnly] == nil {
                    opened[.whenPasscodeSetThisDeviceOnly] = try SecureBytes(randomCount: Self.keyByteCount)
                }
                if tpm != nil && protection.tpmSecret == nil {
                    try seal(&state, opened, passcode: passcode, rootKey: rootKey)
                } else if protection.sealed[.whenPasscodeSetThisDeviceOnly] == nil {
                    var updated = protection
                    try updated.add(
                        opened[.whenPasscodeSetThisDeviceOnly]!, for: .whenPasscodeSetThisDeviceOnly,
                        wrappingKey: wrappingKey)
                    try write(&state, updated)
                }
                keys = opened
            } else {
                keys = try seal(
                    &state, try rootSealedPasscodeClassKeys(state, rootKey: rootKey), passcode: passcode,
                    rootKey: rootKey)
            }
            try storeUnlocked(keys, &state)
        }
    }

    /// Re-seals the passcode classes after the account's passcode changed (outside this project, with `passwd`):
    /// opens them with `previous` and seals them under `passcode`, then unlocks. A store not protected yet is simply
    /// protected under `passcode`.
    ///
    /// - Throws: `EnclaveError.wrongPassword` when `previous` does not open the keychain either, `.lockedOut` when
    ///   the TPM refuses passcode guesses for now, `.io` / `.corrupt` for the files.
    package func changePasscode(from previous: SecureBytes, to passcode: SecureBytes) throws {
        try changingKeybag { state, rootKey in
            var keys: [ProtectionClass: SecureBytes]
            if let protection = state.protection {
                keys = try protection.open(
                    passcode: previous, rootKey: rootKey, tpm: tpm, refused: refusedAuthorizations
                ).keys
                if keys[.whenPasscodeSetThisDeviceOnly] == nil {
                    keys[.whenPasscodeSetThisDeviceOnly] = try SecureBytes(randomCount: Self.keyByteCount)
                }
            } else {
                keys = try rootSealedPasscodeClassKeys(state, rootKey: rootKey)
            }
            try seal(&state, keys, passcode: passcode, rootKey: rootKey)
            try storeUnlocked(keys, &state)
        }
    }

    /// Destroys the `akpu` class key, as Apple does when the passcode is removed: items of that class (and any copy
    /// of them in an older `keychain.db`) never open again. The next unlock by passcode makes a new key.
    package func destroyPasscodeSetClassKey() throws {
        try changingKeybag { state, rootKey in
            if var protection = state.protection {
                protection.sealed[.whenPasscodeSetThisDeviceOnly] = nil
                try write(&state, protection)
                // The unlocked copy goes too: its place holds random bytes until the next unlock.
                let classes = PasscodeProtection.classes(in: .unlocked)
                if let joined = unlockedKeys.read(.unlocked), joined.count == classes.count * Self.keyByteCount,
                    let index = classes.firstIndex(of: .whenPasscodeSetThisDeviceOnly)
                {
                    var replaced = SecureBytes(zeros: 0)
                    for position in classes.indices {
                        let range = position * Self.keyByteCount..<(position + 1) * Self.keyByteCount
                        replaced = replaced.appending(
                            position == index ? try SecureBytes(randomCount: Self.keyByteCount) : joined.slice(range))
                    }
                    try unlockedKeys.store(replaced, in: .unlocked)
                }
            } else {
                let name = ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue
                let sealed = try Self.seal(
                    try SecureBytes(randomCount: Self.keyByteCount), name: name, rootKey: rootKey)
                try rewriteKeybag(&state) { $0[name] = sealed }
                state.wrappedClassKeys[.whenPasscodeSetThisDeviceOnly] = sealed
                state.classKeys[.whenPasscodeSetThisDeviceOnly] = nil
            }
        }
    }

    /// Whether the next passcode success must reach the keybag although the store is unlocked: its `akpu` key was
    /// destroyed and a passcode is in use again.
    package var needsPasscodeSetClassKey: Bool {
        (try? state.withLock { state in
            try refresh(&state)
            guard let protection = state.protection else { return false }
            return protection.sealed[.whenPasscodeSetThisDeviceOnly] == nil
        }) ?? false
    }

    /// The TPM the store's root key is sealed to, which seals its passcode layer too.
    var tpm: TPM? {
        if case .tpm(let tpm) = rootKeys.backend { return tpm }
        return nil
    }

    /// `changingState` with the root key loaded (the state written records an unlock when `change` stored unlocked
    /// keys).
    func changingKeybag(_ change: (inout State, SecureBytes) throws -> Void) throws {
        let rootKey = try rootKeys.load()
        try changingState { state in try change(&state, rootKey) }
    }

    /// Puts the passcode classes' keys where unlocked keys are kept, and marks the store unlocked in this boot.
    func storeUnlocked(_ keys: [ProtectionClass: SecureBytes], _ state: inout State) throws {
        for slot in UnlockedSlot.allCases {
            var joined = SecureBytes(zeros: 0)
            for protectionClass in PasscodeProtection.classes(in: slot) {
                joined = joined.appending(keys[protectionClass]!)
            }
            try unlockedKeys.store(joined, in: slot)
        }
        state.persisted.locked = false
        state.persisted.unlockBootID = bootID
    }

    /// The passcode classes' keys of a store not protected yet, from their root-only copies.
    func rootSealedPasscodeClassKeys(_ state: State, rootKey: SecureBytes) throws -> [ProtectionClass: SecureBytes] {
        var keys: [ProtectionClass: SecureBytes] = [:]
        for protectionClass in PasscodeProtection.classes {
            guard let wrapped = state.wrappedClassKeys[protectionClass] else {
                throw EnclaveError(.corrupt, "the keybag does not hold every key")
            }
            keys[protectionClass] = try Self.unwrap(wrapped, name: protectionClass.rawValue, rootKey: rootKey)
        }
        return keys
    }

    /// Seals `keys` under `passcode` (and the TPM, on that backend) and makes that the keybag's passcode layer.
    @discardableResult
    func seal(
        _ state: inout State, _ keys: [ProtectionClass: SecureBytes], passcode: SecureBytes, rootKey: SecureBytes
    ) throws -> [ProtectionClass: SecureBytes] {
        try write(&state, try PasscodeProtection.seal(keys, passcode: passcode, rootKey: rootKey, tpm: tpm))
        return keys
    }

    /// Rewrites the keybag with `protection` as its passcode layer, without root-only copies of the passcode
    /// classes (a store being protected) or an earlier layer's entries.
    func write(_ state: inout State, _ protection: PasscodeProtection) throws {
        try rewriteKeybag(&state) { entries in
            for protectionClass in PasscodeProtection.classes { entries[protectionClass.rawValue] = nil }
            for name in PasscodeProtection.entryNames { entries[name] = nil }
            entries.merge(protection.entries) { _, new in new }
        }
        state.protection = protection
        for protectionClass in PasscodeProtection.classes { state.wrappedClassKeys[protectionClass] = nil }
    }

    /// Reads the keybag's entries, applies `edit` and writes them back (atomically), noting the file as read.
    func rewriteKeybag(_ state: inout State, _ edit: (inout [String: Data]) -> Void) throws {
        var entries = try Self.decodeKeybag(try Self.readFile(keybagPath)).1
        edit(&entries)
        try Self.writeFileAtomically(Self.encodeKeybag(entries), to: keybagPath)
        state.keybagStamp = Self.stamp(of: keybagPath)
    }

    /// Records whether a passcode is set; without one, `akpu` keys are unavailable.
    package func setPasscodeSet(_ isSet: Bool) throws {
        try updateState { $0.passcodeSet = isSet }
    }

    /// Whether `protectionClass`'s key is in memory now.
    package func isAvailable(_ protectionClass: ProtectionClass) -> Bool {
        (try? classKey(protectionClass)) != nil
    }

    // MARK: Row keys

    /// Seals a per-row key under `protectionClass`'s key, bound to `binding` (the row's identity).
    ///
    /// - Throws: `EnclaveError.locked` or `.passcodeNotSet` when the class key is not available.
    package func wrap(rowKey: SecureBytes, protectionClass: ProtectionClass, binding: Data) throws -> Data {
        let key = try classKey(protectionClass)
        return try AESGCM.seal(rowKey, using: key, authenticating: binding).combined
    }

    /// Opens a per-row key sealed by `wrap`.
    ///
    /// - Throws: `EnclaveError.locked`/`.passcodeNotSet` when the class key is not available, `.corrupt` when the
    ///   wrapped key does not authenticate (changed bytes, or moved from another row).
    package func unwrap(rowKey wrapped: Data, protectionClass: ProtectionClass, binding: Data) throws -> SecureBytes {
        try wrapped.withUnsafeBytes { box in
            try binding.withUnsafeBytes { try unwrap(rowKey: box, protectionClass: protectionClass, binding: $0) }
        }
    }

    /// ``unwrap(rowKey:protectionClass:binding:)-(Data,_,Data)`` of a wrapped key and associated data read where
    /// they lie.
    package func unwrap(
        rowKey wrapped: UnsafeRawBufferPointer, protectionClass: ProtectionClass, binding: UnsafeRawBufferPointer
    ) throws -> SecureBytes {
        let opener = try classOpener(protectionClass)
        do {
            return try opener.open(combined: wrapped, authenticating: binding)
        } catch {
            throw EnclaveError(.corrupt, "a row key does not authenticate")
        }
    }

    func classKey(_ protectionClass: ProtectionClass) throws -> SecureBytes {
        try state.withLock { state in try classKey(protectionClass, in: &state) }
    }

    /// The decryption context of `protectionClass`'s current key: the lock state is checked as for the key itself,
    /// and a context keyed with another key (a lock and unlock changed it) is made anew.
    func classOpener(_ protectionClass: ProtectionClass) throws -> AESGCM.Opener {
        try state.withLock { state in
            let key: SecureBytes
            do {
                key = try classKey(protectionClass, in: &state)
            } catch {
                state.openers = [:]
                throw error
            }
            if let opener = state.openers[protectionClass], opener.isKeyed(with: key) { return opener }
            do {
                let opener = try AESGCM.Opener(key: key)
                state.openers[protectionClass] = opener
                return opener
            } catch {
                throw EnclaveError(.corrupt, "a class key does not make a cipher context")
            }
        }
    }

    func classKey(_ protectionClass: ProtectionClass, in state: inout State) throws -> SecureBytes {
        try refresh(&state)
        if let key = state.classKeys[protectionClass] { return key }
        if protectionClass == .whenPasscodeSetThisDeviceOnly && !state.persisted.passcodeSet
            && (state.protection != nil || !state.persisted.locked)
        {
            throw EnclaveError(.passcodeNotSet, "no passcode is set")
        }
        if let protection = state.protection {
            if protectionClass == .whenPasscodeSetThisDeviceOnly && protection.sealed[protectionClass] == nil {
                throw EnclaveError(.passcodeNotSet, "the key of this class was destroyed when the passcode went")
            }
            if let key = unlockedKey(protectionClass) { return key }
        }
        throw EnclaveError(.locked, "the keychain is locked")
    }

    /// A protected store's passcode class key, from where unlocked keys are kept; nil while locked.
    func unlockedKey(_ protectionClass: ProtectionClass) -> SecureBytes? {
        let slot: UnlockedSlot = protectionClass.availability == .unlocked ? .unlocked : .afterFirstUnlock
        let classes = PasscodeProtection.classes(in: slot)
        guard let index = classes.firstIndex(of: protectionClass), let keys = unlockedKeys.read(slot),
            keys.count == classes.count * Self.keyByteCount
        else { return nil }
        return keys.slice(index * Self.keyByteCount..<(index + 1) * Self.keyByteCount)
    }
}
