import Foundation
import SecureCrypto
import StoreFiles
import Synchronization

/// The software enclave of one store directory: the device root key, the protection-class keys it wraps, the
/// metadata and index keys, and the keybag's lock state.
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
/// an unlock has happened in this boot (`/proc/sys/kernel/random/boot_id`), `dk`/`dku` always. The state file is
/// shared by every process that opens the directory, and re-read whenever it changes, so `lactl keychain lock` locks
/// every embedded client at once.
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
    private let statePath: String
    private let wrappedClassKeys: [ProtectionClass: Data]
    private let bootID: String
    private let state: Mutex<State>

    private struct State {
        var persisted: PersistedState
        var stamp: FileStamp?
        var classKeys: [ProtectionClass: SecureBytes] = [:]
    }

    private struct PersistedState: Codable, Equatable {
        var locked: Bool
        var unlockBootID: String?
        var passcodeSet: Bool
    }

    private struct FileStamp: Equatable {
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }

    private static let keyByteCount = 32
    private static let keyNames = ProtectionClass.allCases.map(\.rawValue) + ["metadata", "index", "attempts"]
    /// The keybag format: version 2 binds the version into every entry, so an entry can never be read as one of an
    /// older keybag (which would let the attempt key be dropped and made afresh).
    private static let keybagVersion = 2

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

        let keybagPath = directory.appendingPathComponent("keybag").path
        let keybagExists = PrivateFiles.exists(keybagPath)
        let (rootKeys, rootKey) = try RootKeyStore.open(
            in: directory, configuration: try configuration ?? .embedded(), mayCreate: !keybagExists)
        self.rootKeys = rootKeys
        var wrapped: [String: Data]
        var attemptKeyIsNew = false
        if keybagExists {
            let (version, entries) = try Self.decodeKeybag(try Self.readFile(keybagPath))
            wrapped = entries
            if version < Self.keybagVersion {
                // A keybag from before the attempt key: re-seal every key under the current version, add it.
                guard Set(wrapped.keys) == Set(Self.keyNames.filter { $0 != "attempts" }) else {
                    throw EnclaveError(.corrupt, "the keybag does not hold every key")
                }
                var upgraded: [String: Data] = [:]
                for (name, entry) in wrapped {
                    let key = try Self.unwrap(entry, name: name, version: version, rootKey: rootKey)
                    upgraded[name] = try Self.seal(key, name: name, rootKey: rootKey)
                }
                upgraded["attempts"] = try Self.seal(
                    try SecureBytes(randomCount: Self.keyByteCount), name: "attempts", rootKey: rootKey)
                try Self.writeFileAtomically(Self.encodeKeybag(upgraded), to: keybagPath)
                wrapped = upgraded
                attemptKeyIsNew = true
            }
        } else {
            wrapped = [:]
            for name in Self.keyNames {
                wrapped[name] = try Self.seal(try SecureBytes(randomCount: Self.keyByteCount), name: name, rootKey: rootKey)
            }
            try Self.writeFileAtomically(Self.encodeKeybag(wrapped), to: keybagPath)
            attemptKeyIsNew = true
        }
        guard Set(wrapped.keys) == Set(Self.keyNames) else {
            throw EnclaveError(.corrupt, "the keybag does not hold every key")
        }
        metadataKey = try Self.unwrap(wrapped["metadata"]!, name: "metadata", rootKey: rootKey)
        keyAuthorizationKey = try HKDFSHA256.deriveKey(
            inputKeyMaterial: metadataKey, info: Data("la.enclave-key.tpm-authorization.v1".utf8), outputByteCount: 32)
        indexKey = try Self.unwrap(wrapped["index"]!, name: "index", rootKey: rootKey)
        indexMAC = HMACSHA256.Key(indexKey)
        attemptKey = try Self.unwrap(wrapped["attempts"]!, name: "attempts", rootKey: rootKey)
        self.attemptKeyIsNew = attemptKeyIsNew
        var classKeys: [ProtectionClass: Data] = [:]
        for protectionClass in ProtectionClass.allCases { classKeys[protectionClass] = wrapped[protectionClass.rawValue] }
        wrappedClassKeys = classKeys

        // A new store starts unlocked (the embedded store has no passcode of its own yet); an existing store whose
        // state file is missing or damaged is locked: damage never opens anything.
        let lockedState = PersistedState(locked: true, unlockBootID: nil, passcodeSet: false)
        let statePath = self.statePath
        let stored = try Self.files { try PrivateFiles.read(statePath) }.flatMap {
            try? JSONDecoder().decode(PersistedState.self, from: $0)
        }
        var persisted =
            stored ?? (keybagExists ? lockedState : PersistedState(locked: false, unlockBootID: nil, passcodeSet: false))
        if !persisted.locked && persisted.unlockBootID != bootID {
            persisted.unlockBootID = bootID
        }
        if persisted != stored {
            try Self.writeFileAtomically(JSONEncoder().encode(persisted), to: statePath)
        }
        state = Mutex(State(persisted: persisted, stamp: nil))
        try state.withLock { state in try refresh(&state) }
    }

    // MARK: Lock state

    /// Whether the keybag is locked (as every process sharing the directory sees it).
    package var isLocked: Bool {
        (try? state.withLock { state in try refresh(&state); return state.persisted.locked }) ?? true
    }

    /// Whether a passcode is set (needed for `akpu` items).
    package var isPasscodeSet: Bool {
        (try? state.withLock { state in try refresh(&state); return state.persisted.passcodeSet }) ?? false
    }

    /// Locks the keybag: `ak`, `aku` and `akpu` keys leave memory here and in every process that shares the store.
    package func lock() throws {
        try updateState { $0.locked = true }
    }

    /// Unlocks the keybag and records this boot as one with an unlock (making `ck`/`cku` available until reboot).
    ///
    /// The caller must have authenticated the user; the engine decides that.
    package func unlock() throws {
        try updateState {
            $0.locked = false
            $0.unlockBootID = bootID
        }
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
        let key = try classKey(protectionClass)
        do {
            return try AESGCM.open(AESGCM.SealedBox(combined: wrapped), using: key, authenticating: binding)
        } catch {
            throw EnclaveError(.corrupt, "a row key does not authenticate")
        }
    }

    private func classKey(_ protectionClass: ProtectionClass) throws -> SecureBytes {
        try state.withLock { state in
            try refresh(&state)
            if let key = state.classKeys[protectionClass] { return key }
            if protectionClass == .whenPasscodeSetThisDeviceOnly && !state.persisted.passcodeSet
                && !state.persisted.locked
            {
                throw EnclaveError(.passcodeNotSet, "no passcode is set")
            }
            throw EnclaveError(.locked, "the keychain is locked")
        }
    }

    // MARK: State file


    private func updateState(_ change: (inout PersistedState) -> Void) throws {
        let lock = try Self.files { try FileLock(path: directory.appendingPathComponent("enclave.lock").path) }
        defer { lock.unlock() }
        try state.withLock { state in
            state.stamp = nil
            try refresh(&state)
            change(&state.persisted)
            try Self.writeFileAtomically(JSONEncoder().encode(state.persisted), to: statePath)
            state.stamp = nil
            try refresh(&state)
        }
    }

    /// Re-reads the state file when it changed and brings the set of class keys in memory in line with it.
    private func refresh(_ state: inout State) throws {
        let stamp = Self.stamp(of: statePath)
        if stamp == state.stamp && stamp != nil { return }
        // A state file that vanished or does not decode means locked (keeping what else it said).
        if stamp != nil, let data = try? Self.readFile(statePath),
            let persisted = try? JSONDecoder().decode(PersistedState.self, from: data)
        {
            state.persisted = persisted
        } else {
            state.persisted.locked = true
        }
        state.stamp = stamp
        let afterFirstUnlock = !state.persisted.locked || state.persisted.unlockBootID == bootID
        var wanted: Set<ProtectionClass> = []
        for protectionClass in ProtectionClass.allCases {
            let available: Bool
            switch protectionClass.availability {
            case .always: available = true
            case .afterFirstUnlock: available = afterFirstUnlock
            case .unlocked: available = !state.persisted.locked
            }
            if available && (protectionClass != .whenPasscodeSetThisDeviceOnly || state.persisted.passcodeSet) {
                wanted.insert(protectionClass)
            }
        }
        for protectionClass in state.classKeys.keys where !wanted.contains(protectionClass) {
            state.classKeys[protectionClass] = nil
        }
        let missing = wanted.filter { state.classKeys[$0] == nil }
        if missing.isEmpty { return }
        let rootKey = try rootKeys.load()
        for protectionClass in missing {
            state.classKeys[protectionClass] = try Self.unwrap(
                wrappedClassKeys[protectionClass]!, name: protectionClass.rawValue, rootKey: rootKey)
        }
    }

    // MARK: Files

    private static func keybagBinding(_ name: String, version: Int) -> Data {
        Data("la.keybag.v\(version):\(name)".utf8)
    }

    private static func seal(_ key: SecureBytes, name: String, rootKey: SecureBytes) throws -> Data {
        try AESGCM.seal(key, using: rootKey, authenticating: keybagBinding(name, version: keybagVersion)).combined
    }

    private static func unwrap(
        _ wrapped: Data, name: String, version: Int = keybagVersion, rootKey: SecureBytes
    ) throws -> SecureBytes {
        do {
            return try AESGCM.open(
                AESGCM.SealedBox(combined: wrapped), using: rootKey, authenticating: keybagBinding(name, version: version))
        } catch {
            throw EnclaveError(.corrupt, "the keybag does not open with this device key")
        }
    }

    private static func encodeKeybag(_ wrapped: [String: Data]) -> Data {
        var out = Data("LAKB\(keybagVersion)".utf8)
        for name in wrapped.keys.sorted() {
            let nameBytes = Data(name.utf8)
            out.append(UInt8(nameBytes.count))
            out.append(nameBytes)
            out.append(UInt8(wrapped[name]!.count))
            out.append(wrapped[name]!)
        }
        return out
    }

    /// The keybag's version (1 or 2, from its magic) and its sealed entries by name.
    private static func decodeKeybag(_ data: Data) throws -> (Int, [String: Data]) {
        let bytes = [UInt8](data)
        guard bytes.count >= 5, Data(bytes[0..<4]) == Data("LAKB".utf8), bytes[4] == UInt8(ascii: "1") || bytes[4] == UInt8(ascii: "2")
        else {
            throw EnclaveError(.corrupt, "the keybag file is not a keybag")
        }
        let version = Int(bytes[4] - UInt8(ascii: "0"))
        var result: [String: Data] = [:]
        var offset = 5
        func field() throws -> Data {
            guard offset < bytes.count else { throw EnclaveError(.corrupt, "the keybag file is truncated") }
            let count = Int(bytes[offset])
            guard offset + 1 + count <= bytes.count else { throw EnclaveError(.corrupt, "the keybag file is truncated") }
            defer { offset += 1 + count }
            return Data(bytes[(offset + 1)..<(offset + 1 + count)])
        }
        while offset < bytes.count {
            let name = String(decoding: try field(), as: UTF8.self)
            guard result.updateValue(try field(), forKey: name) == nil else {
                throw EnclaveError(.corrupt, "the keybag names a key twice")
            }
        }
        return (version, result)
    }

    /// Runs a store-file operation, reporting its failure as `EnclaveError.io`.
    static func files<Result: ~Copyable>(_ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch let failure as PrivateFileError {
            throw EnclaveError(.io, failure.message)
        }
    }

    static func createPrivateDirectory(_ directory: URL) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw EnclaveError(.io, "cannot create the store directory")
        }
        chmod(directory.path, 0o700)
    }

    static func readFile(_ path: String) throws -> Data {
        guard let data = try? PrivateFiles.read(path) else {
            throw EnclaveError(.io, "cannot read \((path as NSString).lastPathComponent)")
        }
        return data
    }

    /// Writes `data` to a fresh 0600 file and renames it over `path`, so readers see the old or the new file.
    static func writeFileAtomically(_ data: Data, to path: String) throws {
        try files { try PrivateFiles.writeAtomically(data, to: path) }
    }

    private static func stamp(of path: String) -> FileStamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileStamp(
            inode: UInt64(info.st_ino), size: Int64(info.st_size), seconds: info.st_mtim.tv_sec,
            nanoseconds: info.st_mtim.tv_nsec)
    }

    private static func currentBootID() -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/sys/kernel/random/boot_id") else {
            return "unknown-boot"
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

