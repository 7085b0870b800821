import Foundation
import SecureCrypto

/// One request to the engine, as the client sends it: the caller's dictionaries with values already converted to
/// `KeychainValue` (semantic checks happen in the engine).
package enum KeychainRequest: Sendable, Equatable {
    case add([String: KeychainValue])
    case copyMatching([String: KeychainValue])
    case update(query: [String: KeychainValue], attributes: [String: KeychainValue])
    case delete([String: KeychainValue])
    case lock
    case lockState
    /// Whether the keychain's passcode classes are sealed under the passcode (it was unlocked by passcode once);
    /// the answer is ``KeychainResponse/sealedUnderPasscode(_:)``.
    case sealingState
    /// Seals every item the caller may see, except `*ThisDeviceOnly` ones and those under an access-control list,
    /// under `password`; the answer is ``KeychainResponse/exportedBackup(_:count:skipped:)``, the backup file's
    /// bytes, which the client writes. No path crosses: the engine (in `localauthd`, root) opens no file for a
    /// caller.
    case exportBackup(password: SecureBytes)
    /// Adds the items of a backup file's `contents` (read by the client); items whose primary key exists are left
    /// as they are.
    case importBackup(contents: Data, password: SecureBytes)
    /// Checks the store's database file and every row the caller's open classes can decrypt; the answer is
    /// ``KeychainResponse/storeCheck(_:)``. Only for a caller that sees every access group.
    case checkStore
    /// Recovers a damaged store from a backup: the damaged database file is moved aside (kept, never deleted), an
    /// empty one takes its place, and the backup's items are added to it. Refused (`errSecParam`) when the file is
    /// not damaged, and before anything moves when the backup does not open. Only for a caller that sees every
    /// access group. The answer is ``KeychainResponse/restoredBackup(count:skipped:setAside:)``.
    case restoreBackup(contents: Data, password: SecureBytes)
}

/// The engine's answer to a `KeychainRequest`.
package enum KeychainResponse: Sendable, Equatable {
    case success
    /// Results of `copyMatching`, or of `add` with return keys.
    case items(ItemResults)
    case locked(Bool)
    /// Whether the passcode classes are sealed under the passcode (before the first unlock by passcode, the lock
    /// is only a flag in the store's state file).
    case sealedUnderPasscode(Bool)
    /// Items added from a backup, and items skipped (already present).
    case backup(count: Int, skipped: Int)
    /// A backup file's bytes, the items in it, and the items left out (device-only, or under an access-control
    /// list).
    case exportedBackup(Data, count: Int, skipped: Int)
    /// What ``KeychainRequest/checkStore`` found.
    case storeCheck(StoreCheckReport)
    /// Items added from a backup into a fresh database, items skipped, and where the damaged file was moved.
    case restoredBackup(count: Int, skipped: Int, setAside: String)
}

/// A store's health, as `lactl keychain check` prints it.
package struct StoreCheckReport: Sendable, Equatable, ProtocolCodable {
    /// The database file checked.
    package var file: String
    /// What is wrong with the file (SQLite's integrity check, or why it does not open); empty when nothing.
    package var problems: [String]
    /// The rows in the item table; nil when they cannot be counted.
    package var rowCount: Int?
    /// Rows whose sealed parts do not open (their class unlocked): damaged inside a sound file.
    package var unreadableRows: Int
    /// Rows not opened because their class is locked.
    package var lockedRows: Int

    package init(file: String, problems: [String], rowCount: Int?, unreadableRows: Int, lockedRows: Int) {
        self.file = file
        self.problems = problems
        self.rowCount = rowCount
        self.unreadableRows = unreadableRows
        self.lockedRows = lockedRows
    }

    /// Whether the file is damaged (a restore from a backup is allowed).
    package var isDamaged: Bool { !problems.isEmpty }

    /// Fields: 1 file, 2 problems, 3 row count (absent when unknown), 4 unreadable rows, 5 locked rows.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, file)
        writer.field(2, problems)
        writer.optionalField(3, rowCount)
        writer.field(4, unreadableRows)
        writer.field(5, lockedRows)
    }

    package init(from reader: inout MessageReader) throws {
        file = try reader.field(1)
        problems = try reader.field(2)
        rowCount = try reader.optionalField(3)
        unreadableRows = try reader.field(4)
        lockedRows = try reader.field(5)
    }
}

extension KeychainRequest: ProtocolCodable {
    /// A variant: 1 add, 2 copyMatching, 3 update, 4 delete, 5 lock, 6 lockState, 9 exportBackup (field 1
    /// password), 10 importBackup (1 contents, 2 password), 11 sealingState, 12 checkStore, 13 restoreBackup (1
    /// contents, 2 password); other associated values as fields 1, 2. Variants 7 and
    /// 8 (backups naming a file path the engine opened) are retired and never reused.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .add(let attributes): writer.variant(1) { $0.field(1, attributes) }
        case .copyMatching(let query): writer.variant(2) { $0.field(1, query) }
        case .update(let query, let attributes):
            writer.variant(3) {
                $0.field(1, query)
                $0.field(2, attributes)
            }
        case .delete(let query): writer.variant(4) { $0.field(1, query) }
        case .lock: writer.variant(5)
        case .lockState: writer.variant(6)
        case .sealingState: writer.variant(11)
        case .exportBackup(let password): writer.variant(9) { $0.field(1, password) }
        case .importBackup(let contents, let password):
            writer.variant(10) {
                $0.field(1, contents)
                $0.field(2, password)
            }
        case .checkStore: writer.variant(12)
        case .restoreBackup(let contents, let password):
            writer.variant(13) {
                $0.field(1, contents)
                $0.field(2, password)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .add(try payload.field(1))
            case 2: .copyMatching(try payload.field(1))
            case 3: .update(query: try payload.field(1), attributes: try payload.field(2))
            case 4: .delete(try payload.field(1))
            case 5: .lock
            case 6: .lockState
            case 9: .exportBackup(password: try payload.field(1))
            case 10: .importBackup(contents: try payload.field(1), password: try payload.field(2))
            case 11: .sealingState
            case 12: .checkStore
            case 13: .restoreBackup(contents: try payload.field(1), password: try payload.field(2))
            default: nil
            }
        }
    }
}

extension KeychainResponse: ProtocolCodable {
    /// A variant: 1 success, 2 items, 3 locked, 4 backup, 5 exportedBackup (1 contents, 2 count, 3 skipped),
    /// 6 sealedUnderPasscode, 7 storeCheck, 8 restoredBackup (1 count, 2 skipped, 3 setAside);
    /// associated values as fields 1, 2.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .success: writer.variant(1)
        case .items(let results): writer.variant(2) { $0.field(1, results) }
        case .locked(let locked): writer.variant(3) { $0.field(1, locked) }
        case .sealedUnderPasscode(let sealed): writer.variant(6) { $0.field(1, sealed) }
        case .backup(let count, let skipped):
            writer.variant(4) {
                $0.field(1, count)
                $0.field(2, skipped)
            }
        case .exportedBackup(let contents, let count, let skipped):
            writer.variant(5) {
                $0.field(1, contents)
                $0.field(2, count)
                $0.field(3, skipped)
            }
        case .storeCheck(let report): writer.variant(7) { $0.field(1, report) }
        case .restoredBackup(let count, let skipped, let setAside):
            writer.variant(8) {
                $0.field(1, count)
                $0.field(2, skipped)
                $0.field(3, setAside)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .success
            case 2: .items(try payload.field(1))
            case 3: .locked(try payload.field(1))
            case 4: .backup(count: try payload.field(1), skipped: try payload.field(2))
            case 5: .exportedBackup(try payload.field(1), count: try payload.field(2), skipped: try payload.field(3))
            case 6: .sealedUnderPasscode(try payload.field(1))
            case 7: .storeCheck(try payload.field(1))
            case 8:
                .restoredBackup(
                    count: try payload.field(1), skipped: try payload.field(2), setAside: try payload.field(3))
            default: nil
            }
        }
    }
}
