import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol
import StoreFiles

/// Backups: every exportable item sealed under a key derived from a backup password (scrypt, parameters in the
/// file), as Apple's encrypted backups carry migratory items and leave `*ThisDeviceOnly` ones behind.
///
/// Enclave keys (sealed to this machine) and items with an access-control list (reading their data needs an
/// authentication) stay behind as well.
///
/// File layout: `LABACKUP1\n`, a 32-bit big-endian header length, the header (JSON: the KDF parameters), then
/// AES-256-GCM `nonce || ciphertext || tag` whose associated data is everything before it. The plaintext is, per
/// item: class, encoded attributes and data, each length-prefixed.
extension KeychainEngine {
    private static let backupMagic = Data("LABACKUP1\n".utf8)

    private struct BackupEntry {
        var itemClass: ItemClass
        var attributes: Data
        var data: SecureBytes
    }

    /// The backup file's bytes, the items in it and the items left out. The client writes the file.
    func exportBackup(password: SecureBytes, caller: CallerIdentity) throws -> (Data, Int, Int) {
        guard !password.isEmpty else { throw KeychainStatus(.param, "the backup password is empty") }
        var skipped = 0
        let entries: [BackupEntry] = try database.read { transaction in
            var entries: [BackupEntry] = []
            for row in try transaction.allItems() where caller.mayAccess(row.accessGroup) {
                let item = try sealer.open(row)
                // Device-only items never leave, nor do enclave keys, whose data is a handle sealed to this
                // machine's device key or TPM (Apple's Secure Enclave keys never migrate either); items under an
                // access-control list need an authentication to read, which an export cannot ask for, so they stay
                // too.
                let isEnclaveKey = item.attributes["tkid"] == .string(Self.secureEnclaveToken)
                if item.protectionClass.isThisDeviceOnly || isEnclaveKey || item.accessControl != nil {
                    skipped += 1
                    continue
                }
                guard enclave.isAvailable(item.protectionClass) else {
                    throw KeychainStatus(.interactionNotAllowed, "the keychain is locked")
                }
                guard let sealedValue = try transaction.value(rowID: row.rowID) else { continue }
                entries.append(
                    BackupEntry(
                        itemClass: item.itemClass, attributes: AttributeCodec.encode(item.attributes),
                        data: try sealer.openData(item, sealedValue: sealedValue)))
            }
            return entries
        }
        let plaintext = Self.serialize(entries)
        let kdf = try PasswordKDF.scrypt()
        let header = try JSONEncoder().encode(kdf)
        var prefix = Self.backupMagic
        withUnsafeBytes(of: UInt32(header.count).bigEndian) { prefix.append(contentsOf: $0) }
        prefix.append(header)
        let key = try kdf.deriveKey(from: password)
        let sealed = try AESGCM.seal(plaintext, using: key, authenticating: prefix)
        let contents = prefix + sealed.combined
        // The bytes travel in one message: a backup that cannot is refused here, not cut off on the way.
        guard contents.count <= MessageLimits.default.maximumFrameByteCount - (64 << 10) else {
            throw KeychainStatus(.allocate, "the backup would be larger than one message (64 MiB)")
        }
        return (contents, entries.count, skipped)
    }

    /// The largest header: a few hundred bytes of KDF parameters in practice.
    static let maximumBackupHeaderByteCount = 4096

    /// Imports a backup file's `contents` (read by the client, bounded by the largest message). Everything read
    /// before the contents authenticate is bounded and checked before any work: the header's length and the KDF's
    /// parameters (``PasswordKDF/checkedForUntrustedInput()``), so crafted contents are refused at once instead of
    /// trapping, hanging or exhausting memory. The header is part of the associated data of the sealed contents.
    ///
    /// - Throws: `errSecDecode` for contents that are not a backup, are truncated, or whose header is damaged
    ///   or out of bounds; `errSecAuthFailed` for a wrong password (or contents that do not authenticate); nothing
    ///   is imported then.
    func importBackup(_ contents: Data, password: SecureBytes, caller: CallerIdentity) throws -> (Int, Int) {
        try add(Self.openBackup(contents, password: password), caller: caller)
    }

    /// Recovers a damaged store from a backup (``KeychainRequest/restoreBackup(contents:password:)``): the backup
    /// is opened first, so a wrong password or a damaged backup moves nothing; then the damaged database file is
    /// set aside and the backup's items are added to a fresh one.
    ///
    /// - Returns: the items added and skipped, and where the damaged file now is.
    /// - Throws: `errSecMissingEntitlement` for a caller that does not see every group, `errSecParam` when the
    ///   database is not damaged (an ordinary import is the way then), what opening the backup throws.
    func restoreBackup(_ contents: Data, password: SecureBytes, caller: CallerIdentity) throws -> (Int, Int, String) {
        guard caller.mayAccessAllGroups else {
            throw KeychainStatus(.missingEntitlement, "restoring the keychain needs access to every group")
        }
        let entries = try Self.openBackup(contents, password: password)
        guard database.check().problems.isEmpty == false else {
            throw KeychainStatus(
                .param, "the keychain database \(database.path) is not damaged: import the backup instead")
        }
        let aside = try database.setAsideAndStartAfresh()
        let (count, skipped) = try add(entries, caller: caller)
        return (count, skipped, aside)
    }

    /// The store's health (``KeychainRequest/checkStore``): SQLite's check of the file, then every row whose class
    /// is unlocked opened as a lookup would (attributes, then data).
    ///
    /// - Throws: `errSecMissingEntitlement` for a caller that does not see every group.
    func checkStore(caller: CallerIdentity) throws -> StoreCheckReport {
        guard caller.mayAccessAllGroups else {
            throw KeychainStatus(.missingEntitlement, "checking the keychain needs access to every group")
        }
        let (problems, rowCount) = database.check()
        var report = StoreCheckReport(
            file: database.path, problems: problems, rowCount: rowCount, unreadableRows: 0, lockedRows: 0)
        guard problems.isEmpty else { return report }
        do {
            try database.read { transaction in
                for row in try transaction.allItems() {
                    guard let protectionClass = ProtectionClass(rawValue: row.protectionClass) else {
                        report.unreadableRows += 1
                        continue
                    }
                    guard enclave.isAvailable(protectionClass) else {
                        report.lockedRows += 1
                        continue
                    }
                    do {
                        let item = try sealer.open(row)
                        if let sealedValue = try transaction.value(rowID: row.rowID) {
                            _ = try sealer.openData(item, sealedValue: sealedValue)
                        }
                    } catch {
                        report.unreadableRows += 1
                    }
                }
            }
        } catch {
            report.problems.append(Self.status(error).message)
        }
        return report
    }

    /// The entries of a backup file's `contents`, authenticated under `password`.
    private static func openBackup(_ contents: Data, password: SecureBytes) throws -> [BackupEntry] {
        let magic = Self.backupMagic
        guard contents.count > magic.count + 4, contents.prefix(magic.count) == magic else {
            throw KeychainStatus(.decode, "not a keychain backup")
        }
        var headerLength = 0
        for byte in contents[magic.count..<magic.count + 4] { headerLength = headerLength << 8 | Int(byte) }
        guard headerLength > 0, headerLength <= Self.maximumBackupHeaderByteCount,
            contents.count - (magic.count + 4) > headerLength
        else { throw KeychainStatus(.decode, "the backup header is damaged") }
        let headerEnd = magic.count + 4 + headerLength
        let kdf: PasswordKDF
        do {
            kdf = try JSONDecoder().decode(PasswordKDF.self, from: contents.subdata(in: magic.count + 4..<headerEnd))
                .checkedForUntrustedInput()
        } catch {
            throw KeychainStatus(.decode, "the backup header is damaged or asks for parameters out of bounds")
        }
        let key = try kdf.deriveKey(from: password)
        let plaintext: SecureBytes
        do {
            plaintext = try AESGCM.open(
                AESGCM.SealedBox(combined: contents.subdata(in: headerEnd..<contents.count)), using: key,
                authenticating: contents.prefix(headerEnd))
        } catch {
            throw KeychainStatus(.authFailed, "wrong backup password, or a damaged backup")
        }
        return try deserialize(plaintext)
    }

    /// Adds backup `entries` the caller may see whose primary key is not taken; device-only items and identities
    /// are skipped.
    private func add(_ entries: [BackupEntry], caller: CallerIdentity) throws -> (Int, Int) {
        var skipped = 0
        let events = try database.write { transaction in
            var events: [EngineEvent] = []
            for entry in entries {
                let attributes = try AttributeCodec.decode(entry.attributes)
                guard let group = attributes[ItemKey.accessGroup]?.stringValue, caller.mayAccess(group) else {
                    skipped += 1
                    continue
                }
                let protectionClass = try Self.protectionClass(of: attributes)
                let synchronizable = attributes[ItemKey.synchronizable]?.boolValue ?? false
                guard !protectionClass.isThisDeviceOnly, entry.itemClass != .identity else {
                    skipped += 1
                    continue
                }
                let blindIndex = sealer.blindIndex(
                    itemClass: entry.itemClass, accessGroup: group, synchronizable: synchronizable,
                    attributes: attributes)
                if !(try transaction.items(blindIndexes: [blindIndex]).isEmpty) {
                    skipped += 1
                    continue
                }
                let row = StoredItem(
                    rowID: try transaction.nextRowID(), itemClass: entry.itemClass.rawValue, accessGroup: group,
                    protectionClass: protectionClass.rawValue, synchronizable: synchronizable,
                    blindIndex: blindIndex, attributes: Data(), wrappedKey: Data(), value: nil)
                let sealed = try sealer.seal(
                    row, attributes: attributes, data: entry.data, protectionClass: protectionClass)
                try transaction.insert(sealed)
                events.append(event(.added, sealed))
            }
            return events
        }
        hubEmit(events)
        return (events.count, skipped)
    }

    private static func serialize(_ entries: [BackupEntry]) -> SecureBytes {
        var total = 4
        for entry in entries {
            total += 12 + entry.itemClass.rawValue.utf8.count + entry.attributes.count + entry.data.count
        }
        return SecureBytes(count: total) { buffer in
            var offset = 0
            func put(_ count: Int) {
                for shift in stride(from: 24, through: 0, by: -8) {
                    buffer[offset] = UInt8(truncatingIfNeeded: count >> shift)
                    offset += 1
                }
            }
            func put(_ bytes: UnsafeRawBufferPointer) {
                put(bytes.count)
                if bytes.count > 0 {
                    UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + bytes.count]).copyMemory(
                        from: bytes)
                }
                offset += bytes.count
            }
            put(entries.count)
            for entry in entries {
                Data(entry.itemClass.rawValue.utf8).withUnsafeBytes { put($0) }
                entry.attributes.withUnsafeBytes { put($0) }
                entry.data.withUnsafeBytes { put($0) }
            }
        }
    }

    private static func deserialize(_ plaintext: SecureBytes) throws -> [BackupEntry] {
        try plaintext.withUnsafeBytes { buffer in
            var offset = 0
            func count() throws -> Int {
                guard buffer.count - offset >= 4 else { throw KeychainStatus(.decode, "the backup is truncated") }
                var value = 0
                for _ in 0..<4 {
                    value = value << 8 | Int(buffer[offset])
                    offset += 1
                }
                return value
            }
            func field() throws -> UnsafeRawBufferPointer {
                let length = try count()
                guard buffer.count - offset >= length else { throw KeychainStatus(.decode, "the backup is truncated") }
                defer { offset += length }
                return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + length])
            }
            var entries: [BackupEntry] = []
            for _ in 0..<(try count()) {
                guard let itemClass = ItemClass(rawValue: String(decoding: try field(), as: UTF8.self)) else {
                    throw KeychainStatus(.decode, "the backup names an unknown class")
                }
                let attributes = Data(try field())
                entries.append(
                    BackupEntry(itemClass: itemClass, attributes: attributes, data: SecureBytes(try field())))
            }
            return entries
        }
    }
}
