import Foundation
import SecureCrypto
import Synchronization

/// The software enclave of one store directory: the device root key, the protection-class keys it wraps, the
/// metadata and index keys, and the keybag's lock state.
///
/// Files (all 0600, in the 0700 store directory): `device.key` (the 256-bit root key, created on first use),
/// `keybag` (every other key, each AES-256-GCM-sealed under the root key with its name as associated data) and
/// `keybag.state` (locked or not, the boot in which the last unlock happened, whether a passcode is set).
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

    let directory: URL
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
    private static let keyNames = ProtectionClass.allCases.map(\.rawValue) + ["metadata", "index"]

    /// Opens the key store in `directory`, creating the directory (0700), the root key and the keybag on first use.
    ///
    /// Opening while the keybag is not locked counts as an unlock in this boot: the embedded store has no passcode
    /// yet, so the first open after boot is what makes `ck` items available.
    ///
    /// - Throws: `EnclaveError.io` when the files cannot be created or read, `.corrupt` when they do not open.
    package init(directory: URL) throws {
        self.directory = directory
        statePath = directory.appendingPathComponent("keybag.state").path
        try Self.createPrivateDirectory(directory)
        bootID = Self.currentBootID()
        let lock = try FileLock(path: directory.appendingPathComponent("enclave.lock").path)
        defer { lock.unlock() }

        let rootKey = try Self.loadOrCreateRootKey(in: directory)
        let keybagPath = directory.appendingPathComponent("keybag").path
        var wrapped: [String: Data]
        if FileManager.default.fileExists(atPath: keybagPath) {
            wrapped = try Self.decodeKeybag(try Self.readFile(keybagPath))
        } else {
            wrapped = [:]
            for name in Self.keyNames {
                let key = try SecureBytes(randomCount: Self.keyByteCount)
                wrapped[name] = try AESGCM.seal(key, using: rootKey, authenticating: Self.keybagBinding(name)).combined
            }
            try Self.writeFileAtomically(Self.encodeKeybag(wrapped), to: keybagPath)
        }
        guard Set(wrapped.keys) == Set(Self.keyNames) else {
            throw EnclaveError(.corrupt, "the keybag does not hold every key")
        }
        metadataKey = try Self.unwrap(wrapped["metadata"]!, name: "metadata", rootKey: rootKey)
        indexKey = try Self.unwrap(wrapped["index"]!, name: "index", rootKey: rootKey)
        indexMAC = HMACSHA256.Key(indexKey)
        var classKeys: [ProtectionClass: Data] = [:]
        for protectionClass in ProtectionClass.allCases { classKeys[protectionClass] = wrapped[protectionClass.rawValue] }
        wrappedClassKeys = classKeys

        var persisted = (try? JSONDecoder().decode(PersistedState.self, from: Self.readFile(statePath)))
            ?? PersistedState(locked: false, unlockBootID: nil, passcodeSet: false)
        if !persisted.locked && persisted.unlockBootID != bootID {
            persisted.unlockBootID = bootID
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
        let lock = try FileLock(path: directory.appendingPathComponent("enclave.lock").path)
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
        if stamp != nil, let data = try? Self.readFile(statePath),
            let persisted = try? JSONDecoder().decode(PersistedState.self, from: data)
        {
            state.persisted = persisted
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
        let rootKey = try Self.loadOrCreateRootKey(in: directory)
        for protectionClass in missing {
            state.classKeys[protectionClass] = try Self.unwrap(
                wrappedClassKeys[protectionClass]!, name: protectionClass.rawValue, rootKey: rootKey)
        }
    }

    // MARK: Files

    private static func keybagBinding(_ name: String) -> Data { Data("la.keybag.v1:\(name)".utf8) }

    private static func unwrap(_ wrapped: Data, name: String, rootKey: SecureBytes) throws -> SecureBytes {
        do {
            return try AESGCM.open(
                AESGCM.SealedBox(combined: wrapped), using: rootKey, authenticating: keybagBinding(name))
        } catch {
            throw EnclaveError(.corrupt, "the keybag does not open with this device key")
        }
    }

    private static func encodeKeybag(_ wrapped: [String: Data]) -> Data {
        var out = Data("LAKB1".utf8)
        for name in wrapped.keys.sorted() {
            let nameBytes = Data(name.utf8)
            out.append(UInt8(nameBytes.count))
            out.append(nameBytes)
            out.append(UInt8(wrapped[name]!.count))
            out.append(wrapped[name]!)
        }
        return out
    }

    private static func decodeKeybag(_ data: Data) throws -> [String: Data] {
        let bytes = [UInt8](data)
        guard bytes.count >= 5, Data(bytes[0..<5]) == Data("LAKB1".utf8) else {
            throw EnclaveError(.corrupt, "the keybag file is not a keybag")
        }
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
            result[name] = try field()
        }
        return result
    }

    static func loadOrCreateRootKey(in directory: URL) throws -> SecureBytes {
        let path = directory.appendingPathComponent("device.key").path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            guard errno == ENOENT else { throw EnclaveError(.io, "cannot open the device key (errno \(errno))") }
            let key = try SecureBytes(randomCount: keyByteCount)
            try key.withUnsafeBytes { try writeFileAtomically($0, to: path) }
            return key
        }
        defer { close(fd) }
        return try SecureBytes(count: keyByteCount) { buffer in
            var filled = 0
            while filled < keyByteCount {
                let n = read(fd, buffer.baseAddress! + filled, keyByteCount - filled)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw EnclaveError(.corrupt, "the device key file is truncated") }
                filled += n
            }
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
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EnclaveError(.io, "cannot read \((path as NSString).lastPathComponent)")
        }
        return data
    }

    /// Writes `data` to a fresh 0600 file and renames it over `path`, so readers see the old or the new file.
    static func writeFileAtomically(_ data: Data, to path: String) throws {
        try data.withUnsafeBytes { try writeFileAtomically($0, to: path) }
    }

    /// Writes `bytes` to a fresh 0600 file and renames it over `path`.
    static func writeFileAtomically(_ data: UnsafeRawBufferPointer, to path: String) throws {
        let temporary = "\(path).\(getpid()).tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw EnclaveError(.io, "cannot create \((path as NSString).lastPathComponent)") }
        let written = write(fd, data.baseAddress, data.count)
        let synced = fsync(fd)
        close(fd)
        guard written == data.count, synced == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw EnclaveError(.io, "cannot write \((path as NSString).lastPathComponent)")
        }
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

/// An exclusive `flock` on a file, held from `init` until `unlock()`.
struct FileLock {
    private let fd: Int32

    init(path: String) throws {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw EnclaveError(.io, "cannot open the enclave lock file") }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                close(fd)
                throw EnclaveError(.io, "cannot lock the enclave lock file")
            }
        }
    }

    func unlock() {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
