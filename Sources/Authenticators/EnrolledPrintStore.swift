import Foundation
import SecureCrypto
import SecurityProtocol
import StoreFiles

/// Where enrolled prints and the per-install salt of the state hash are kept.
///
/// ``FileEnrolledPrintStore`` keeps them in encrypted files; the keychain store can implement this protocol later
/// (an always-available system class), and ``BiometricAuthenticator`` will not notice the difference.
package protocol EnrolledPrintStore: Sendable {
    /// Every stored print, templates included.
    func prints() throws -> [EnrolledPrint]
    /// Stores `print` under its identifier, replacing nothing else.
    func save(_ print: EnrolledPrint) throws
    /// Deletes the print with `identifier`; returns false when there was none.
    func remove(_ identifier: PrintIdentifier) throws -> Bool
    /// A random salt made once per installation (per store), renewed whenever a print is removed.
    func installSalt() throws -> Data
    /// The enrolled-set state hash (see ``computeStateHash()``); a store may answer from a cache it keeps exact.
    func stateHash() throws -> Data?
}

extension EnrolledPrintStore {
    package func stateHash() throws -> Data? {
        try computeStateHash()
    }

    /// The enrolled-set state hash: SHA-256(salt || identifiers sorted byte-wise), nil when nothing is enrolled.
    ///
    /// It changes whenever a print is enrolled or removed and is stable otherwise, which is what
    /// `biometryCurrentSet` access control binds to.
    package func computeStateHash() throws -> Data? {
        let identifiers = try prints().map(\.info.identifier).sorted()
        if identifiers.isEmpty { return nil }
        var hasher = SHA256()
        hasher.update(try installSalt())
        for identifier in identifiers { hasher.update(identifier.bytes) }
        return hasher.finalize()
    }
}

/// The last state hash a ``FileEnrolledPrintStore`` computed and the directory stamp it was computed for.
// Safe to share: both fields are read and written only under `lock`.
final class StateHashCache: @unchecked Sendable {
    struct Stamp: Equatable {
        var device: UInt64
        var inode: UInt64
        var seconds: Int64
        var nanoseconds: Int64
    }

    private let lock = NSLock()
    private var stamp: Stamp?
    private var cached: Data??

    func hash(for stamp: Stamp) -> Data?? {
        lock.withLock { self.stamp == stamp ? cached : nil }
    }

    func store(_ hash: Data?, for stamp: Stamp) {
        lock.withLock {
            self.stamp = stamp
            cached = .some(hash)
        }
    }
}

/// Enrolled prints in files under `directory` (0700): one AES-256-GCM-sealed file per print (0600), named after
/// its identifier, with the key in `store.key` (0600, 32 random bytes) and the salt in `salt` (0600).
///
/// Each file's associated data names its identifier, so renaming or swapping files makes them fail to open.
/// The key file sits beside the data: this protects templates from casual copying of the directory, not from a
/// process running as the same user (the architecture's threat model for embedded mode).
package struct FileEnrolledPrintStore: EnrolledPrintStore {
    package let directory: String

    private static let magic: [UInt8] = Array("LAP1".utf8)

    /// A store in `directory`, created (0700) when missing.
    package init(directory: String) throws {
        try withStateFiles { try PrivateFiles.ensureDirectory(directory) }
        self.directory = directory
    }

    private let stateHashCache = StateHashCache()

    /// The state hash, recomputed (every print decrypted) only when the directory changed since the last answer.
    ///
    /// Every access-control check on a `biometryCurrentSet` item or key asks for it, so the answer is kept while the
    /// directory's modification time stays the same. A time too close to now is never trusted (two changes within
    /// one timestamp tick would look like one), the rule git uses for racy index entries.
    package func stateHash() throws -> Data? {
        var status = stat()
        guard stat(directory, &status) == 0 else { return try computeStateHash() }
        let stamp = StateHashCache.Stamp(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), seconds: Int64(status.st_mtim.tv_sec),
            nanoseconds: Int64(status.st_mtim.tv_nsec))
        if let cached = stateHashCache.hash(for: stamp) { return cached }
        let hash = try computeStateHash()
        // A stamp with nanoseconds comes from a file system with fine timestamps (ticks of a few ms): 50 ms of
        // distance is enough. A whole-second stamp may be coarse: then wait two seconds.
        let stampTime = Double(stamp.seconds) + Double(stamp.nanoseconds) / 1e9
        let margin = stamp.nanoseconds == 0 ? 2.0 : 0.05
        if Date().timeIntervalSince1970 - stampTime >= margin { stateHashCache.store(hash, for: stamp) }
        return hash
    }

    private var lockPath: String { directory + "/store.lock" }

    private func key() throws -> SecureBytes {
        try withStateFiles {
            try PrivateFiles.withExclusiveLock(on: lockPath) {
                // A new key beside existing prints would only make them unreadable: never create one there.
                let hasPrints = try FileManager.default.contentsOfDirectory(atPath: directory)
                    .contains { $0.hasSuffix(".print") }
                return try PrivateFiles.loadOrCreateKey(at: directory + "/store.key", mayCreate: !hasPrints)
            }
        }
    }

    package func installSalt() throws -> Data {
        try withStateFiles { try installSaltLocked() }
    }

    private func installSaltLocked() throws -> Data {
        try PrivateFiles.withExclusiveLock(on: lockPath) {
            let path = directory + "/salt"
            if let salt = try PrivateFiles.read(path) {
                guard salt.count == 32 else {
                    throw AuthenticationError(.invalidContext, "state-hash salt file \(path) is damaged")
                }
                return salt
            }
            let salt = try SecureRandom.bytes(32)
            try PrivateFiles.writeAtomically(salt, to: path)
            return salt
        }
    }

    private func path(for identifier: PrintIdentifier) -> String {
        directory + "/" + identifier.hex + ".print"
    }

    private static func associatedData(_ identifier: PrintIdentifier) -> Data {
        Data("local-authentication.print.v1:".utf8) + identifier.bytes
    }

    package func prints() throws -> [EnrolledPrint] {
        let key = try key()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        var result: [EnrolledPrint] = []
        for name in names.sorted() where name.hasSuffix(".print") {
            let identifier = try PrintIdentifier(hex: String(name.dropLast(".print".count)))
            guard let sealed = try withStateFiles({ try PrivateFiles.read(path(for: identifier)) }) else { continue }
            let plaintext: SecureBytes
            do {
                plaintext = try AESGCM.open(
                    AESGCM.SealedBox(combined: sealed), using: key, authenticating: Self.associatedData(identifier))
            } catch {
                throw AuthenticationError(
                    .invalidContext, "enrolled print \(identifier) does not decrypt with this store's key")
            }
            result.append(try Self.decode(plaintext, identifier: identifier))
        }
        return result
    }

    package func save(_ print: EnrolledPrint) throws {
        let plaintext = try Self.encode(print)
        let box = try AESGCM.seal(
            plaintext, using: try key(), authenticating: Self.associatedData(print.info.identifier))
        try withStateFiles { try PrivateFiles.writeAtomically(box.combined, to: path(for: print.info.identifier)) }
    }

    /// Deletes the print and renews the salt, so the state hash never returns to an earlier value: removing the
    /// fingers added since would otherwise bring back the old set and its hash, and with it every
    /// `biometryCurrentSet` item and key that an enrollment change must retire for good.
    package func remove(_ identifier: PrintIdentifier) throws -> Bool {
        let path = path(for: identifier)
        guard FileManager.default.fileExists(atPath: path) else { return false }
        try withStateFiles {
            try PrivateFiles.withExclusiveLock(on: lockPath) {
                // The new salt first: a crash before the print is gone leaves a newer hash, never the earlier one.
                try PrivateFiles.writeAtomically(try SecureRandom.bytes(32), to: directory + "/salt")
                try PrivateFiles.remove(path)
            }
        }
        return true
    }

    // Record layout: "LAP1", finger (1), enrolled-at seconds since 1970 (8, big-endian), then length-prefixed
    // username, driver, device id (2-byte lengths) and template (4-byte length).
    private static func encode(_ print: EnrolledPrint) throws -> SecureBytes {
        let info = print.info
        let strings = [info.username, info.driver, info.deviceID].map { Array($0.utf8) }
        guard strings.allSatisfy({ $0.count <= Int(UInt16.max) }), print.template.count <= Int(UInt32.max) else {
            throw AuthenticationError(.invalidContext, "enrolled print metadata is too long to store")
        }
        var header: [UInt8] = magic + [UInt8(info.finger.rawValue)]
        let seconds = Int64(info.enrolledAt.timeIntervalSince1970.rounded(.down))
        header += withUnsafeBytes(of: seconds.bigEndian, Array.init)
        for string in strings {
            header += withUnsafeBytes(of: UInt16(string.count).bigEndian, Array.init) + string
        }
        header += withUnsafeBytes(of: UInt32(print.template.count).bigEndian, Array.init)
        return SecureBytes(header).appending(print.template)
    }

    private static func decode(_ record: SecureBytes, identifier: PrintIdentifier) throws -> EnrolledPrint {
        let damaged = AuthenticationError(.invalidContext, "enrolled print \(identifier) is damaged")
        return try record.withUnsafeBytes { bytes -> EnrolledPrint in
            var offset = 0
            func take(_ count: Int) throws -> UnsafeRawBufferPointer {
                guard count >= 0, offset + count <= bytes.count else { throw damaged }
                defer { offset += count }
                return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
            }
            func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
                try take(MemoryLayout<T>.size).reduce(T.zero) { $0 << 8 | T($1) }
            }
            func string() throws -> String {
                let count = Int(try integer(UInt16.self))
                guard let text = String(validating: try take(count), as: UTF8.self) else { throw damaged }
                return text
            }
            guard Array(try take(4)) == magic, let finger = Finger(rawValue: Int(try take(1)[0])) else {
                throw damaged
            }
            let seconds = try integer(Int64.self)
            let username = try string()
            let driver = try string()
            let deviceID = try string()
            let templateCount = Int(try integer(UInt32.self))
            let templateStart = offset
            _ = try take(templateCount)
            guard offset == bytes.count else { throw damaged }
            let info = EnrolledPrintInfo(
                identifier: identifier, finger: finger, username: username, driver: driver, deviceID: deviceID,
                enrolledAt: Date(timeIntervalSince1970: TimeInterval(seconds)))
            return EnrolledPrint(info: info, template: record.slice(templateStart..<templateStart + templateCount))
        }
    }
}
