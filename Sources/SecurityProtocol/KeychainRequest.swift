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
}

extension KeychainRequest: ProtocolCodable {
    /// A variant: 1 add, 2 copyMatching, 3 update, 4 delete, 5 lock, 6 lockState, 9 exportBackup (field 1
    /// password), 10 importBackup (1 contents, 2 password), 11 sealingState; other associated values as fields 1, 2. Variants 7 and
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
            default: nil
            }
        }
    }
}

extension KeychainResponse: ProtocolCodable {
    /// A variant: 1 success, 2 items, 3 locked, 4 backup, 5 exportedBackup (1 contents, 2 count, 3 skipped),
    /// 6 sealedUnderPasscode;
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
            default: nil
            }
        }
    }
}
