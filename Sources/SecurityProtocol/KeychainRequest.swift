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
    /// Writes every item the caller may see, except `*ThisDeviceOnly` ones, to `file`, sealed under `password`.
    case exportBackup(file: URL, password: SecureBytes)
    /// Adds the items of a backup file; items whose primary key exists are left as they are.
    case importBackup(file: URL, password: SecureBytes)
}

/// The engine's answer to a `KeychainRequest`.
package enum KeychainResponse: Sendable, Equatable {
    case success
    /// Results of `copyMatching`, or of `add` with return keys.
    case items(ItemResults)
    case locked(Bool)
    /// Items written to or added from a backup, and items skipped (already present, or device-only).
    case backup(count: Int, skipped: Int)
}

extension KeychainRequest: ProtocolCodable {
    /// A variant: 1 add, 2 copyMatching, 3 update, 4 delete, 5 lock, 6 lockState, 7 exportBackup, 8 importBackup;
    /// associated values as fields 1, 2.
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
        case .exportBackup(let file, let password):
            writer.variant(7) {
                $0.field(1, file)
                $0.field(2, password)
            }
        case .importBackup(let file, let password):
            writer.variant(8) {
                $0.field(1, file)
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
            case 7: .exportBackup(file: try payload.field(1), password: try payload.field(2))
            case 8: .importBackup(file: try payload.field(1), password: try payload.field(2))
            default: nil
            }
        }
    }
}

extension KeychainResponse: ProtocolCodable {
    /// A variant: 1 success, 2 items, 3 locked, 4 backup; associated values as fields 1, 2.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .success: writer.variant(1)
        case .items(let results): writer.variant(2) { $0.field(1, results) }
        case .locked(let locked): writer.variant(3) { $0.field(1, locked) }
        case .backup(let count, let skipped):
            writer.variant(4) {
                $0.field(1, count)
                $0.field(2, skipped)
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
            default: nil
            }
        }
    }
}
