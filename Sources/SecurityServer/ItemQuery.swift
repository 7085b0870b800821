import Enclave
import Foundation
import SecureCrypto
import SecurityProtocol

/// Which synchronizable items a query covers.
package enum SynchronizableFilter: Sendable, Equatable {
    /// Only non-synchronizable items (`kSecAttrSynchronizable` absent or false).
    case no
    /// Only synchronizable items.
    case yes
    /// Both (`kSecAttrSynchronizableAny`).
    case any
}

/// What `kSecUseAuthenticationUI` allows when an item's access control needs an authentication.
package enum AuthenticationUI: String, Sendable {
    case allow = "u_AuthUIA"
    case fail = "u_AuthUIF"
    case skip = "u_AuthUIS"
}

/// A validated request dictionary: what the engine acts on. Built only by `ItemQuery.parse`, which rejects
/// malformed input with `errSecParam` before anything is read or written.
package struct ItemQuery: Sendable {
    package enum Operation: Sendable {
        case add, copyMatching, update, delete
    }

    package var itemClass: ItemClass?
    /// Attribute filters (copy/update/delete) or attribute values (add), normalized to their schema types; the
    /// access group and synchronizable live in their own fields.
    package var attributes: [String: KeychainValue] = [:]
    package var accessGroup: String?
    package var synchronizable: SynchronizableFilter = .no
    /// Whether the dictionary named `kSecAttrSynchronizable` (a persistent reference matches either way otherwise).
    package var synchronizableWasGiven = false
    /// The number of matches wanted; nil = all.
    package var limit: Int? = 1
    package var limitWasGiven = false
    package var caseInsensitive = false
    // Not `[]`: an array literal of another module's option set builds it through the generic initializer.
    package var returns = ReturnOptions(rawValue: 0)
    package var persistentReference: PersistentReference?
    package var authenticationUI: AuthenticationUI = .allow
    /// The caller's `kSecUseAuthenticationContext` handle, when it gave one.
    package var authenticationContext: AuthenticationContextID?
    /// `kSecUseOperationPrompt`: the reason a prompt for this query shows, instead of the request's.
    package var operationPrompt: String?
    /// How the request may ask the user (set by the engine from the request, not parsed).
    package var prompting: Prompting = .none
    package var valueData: SecureBytes?

    /// Validates `dictionary` for `operation`.
    ///
    /// - Throws: `KeychainStatus` `.param` for a missing or unknown class, an unknown key, a value of the wrong type,
    ///   or a key that makes no sense for the operation.
    package static func parse(_ dictionary: [String: KeychainValue], for operation: Operation) throws -> ItemQuery {
        var query = ItemQuery()
        if let classValue = dictionary[ItemKey.itemClass] {
            guard let name = classValue.stringValue, let itemClass = ItemClass(rawValue: name) else {
                throw KeychainStatus(.param, "kSecClass is not a known class")
            }
            query.itemClass = itemClass
        }
        // With the class known its attributes are checked as they come; without (a persistent reference names the
        // class) they wait for the reference.
        let schema = query.itemClass.map(AttributeSchema.attributes(of:))
        var pendingAttributes: [String: KeychainValue] = [:]
        query.attributes.reserveCapacity(dictionary.count)
        for (key, value) in dictionary where key != ItemKey.itemClass {
            // Attributes are four-letter codes, and are most of a query: they skip the comparisons below.
            if key.utf8.count == 4, key != ItemKey.synchronizable, key != ItemKey.accessGroup, key != "nleg" {
                if let schema {
                    try query.addAttribute(key, value, schema: schema, for: operation)
                } else {
                    pendingAttributes[key] = value
                }
                continue
            }
            switch key {
            case ItemKey.matchLimit:
                guard operation == .copyMatching || operation == .delete else {
                    throw KeychainStatus(.param, "kSecMatchLimit is only for queries")
                }
                query.limitWasGiven = true
                switch value {
                case .string(ItemKey.matchLimitOne): query.limit = 1
                case .string(ItemKey.matchLimitAll): query.limit = nil
                case .integer(let n) where n > 0: query.limit = Int(clamping: n)
                default: throw KeychainStatus(.param, "kSecMatchLimit must be One, All or a positive number")
                }
            case ItemKey.matchCaseInsensitive:
                guard operation != .add, let flag = value.boolValue else {
                    throw KeychainStatus(.param, "kSecMatchCaseInsensitive must be a boolean in a query")
                }
                query.caseInsensitive = flag
            case ItemKey.returnData, ItemKey.returnAttributes, ItemKey.returnReference,
                ItemKey.returnPersistentReference:
                guard operation == .add || operation == .copyMatching else {
                    throw KeychainStatus(.param, "return keys are only for SecItemAdd and SecItemCopyMatching")
                }
                guard let flag = value.boolValue else { throw KeychainStatus(.param, "\(key) must be a boolean") }
                let option: ReturnOptions =
                    switch key {
                    case ItemKey.returnData: .data
                    case ItemKey.returnAttributes: .attributes
                    case ItemKey.returnReference: .reference
                    default: .persistentReference
                    }
                if flag { query.returns.insert(option) } else { query.returns.remove(option) }
            case ItemKey.valueData:
                guard operation == .add, let data = value.secretValue else {
                    throw KeychainStatus(.param, "kSecValueData must be data, and belongs in SecItemAdd")
                }
                query.valueData = data
            case ItemKey.valuePersistentReference, "persistref":
                // kSecAttrPersistentReference names the same reference as kSecValuePersistentRef.
                guard operation != .add, case .data(let data) = value,
                    let reference = PersistentReference(data)
                else {
                    throw KeychainStatus(.param, "kSecValuePersistentRef is not a persistent reference")
                }
                query.persistentReference = reference
            case "u_AuthUI":
                guard let name = value.stringValue, let ui = AuthenticationUI(rawValue: name),
                    ui != .skip || operation == .copyMatching
                else {
                    throw KeychainStatus(.param, "kSecUseAuthenticationUI has an unknown value")
                }
                query.authenticationUI = ui
            case "u_NoAuthUI":
                guard let flag = value.boolValue else { throw KeychainStatus(.param, "\(key) must be a boolean") }
                if flag { query.authenticationUI = .fail }
            case ItemKey.authenticationContext:
                guard case .data(let handle) = value, handle.count == 32 else {
                    throw KeychainStatus(.param, "kSecUseAuthenticationContext must be an LAContext")
                }
                query.authenticationContext = AuthenticationContextID(bytes: [UInt8](handle))
            case ItemKey.operationPrompt:
                guard let text = value.stringValue else { throw KeychainStatus(.param, "\(key) must be a string") }
                query.operationPrompt = text.isEmpty ? nil : text
            case "nleg":
                guard value.boolValue != nil else { throw KeychainStatus(.param, "\(key) must be a boolean") }
            case ItemKey.synchronizable:
                query.synchronizableWasGiven = true
                if case .string("syna") = value, operation != .add {
                    query.synchronizable = .any
                } else if let flag = value.boolValue {
                    query.synchronizable = flag ? .yes : .no
                } else {
                    throw KeychainStatus(.param, "kSecAttrSynchronizable must be a boolean or Any (not in an add)")
                }
            case ItemKey.accessGroup:
                guard let group = value.stringValue, !group.isEmpty else {
                    throw KeychainStatus(.param, "kSecAttrAccessGroup must be a non-empty string")
                }
                query.accessGroup = group
            default:
                if let schema {
                    try query.addAttribute(key, value, schema: schema, for: operation)
                } else {
                    pendingAttributes[key] = value
                }
            }
        }
        guard query.itemClass != nil || (query.persistentReference != nil && operation != .add) else {
            throw KeychainStatus(.param, "kSecClass is missing")
        }
        if operation == .add && query.itemClass == .identity {
            throw KeychainStatus(.param, "an identity is added as its certificate and its private key")
        }
        if schema == nil {
            let named = AttributeSchema.attributes(of: query.itemClass ?? query.persistentReference!.itemClass)
            for (key, value) in pendingAttributes { try query.addAttribute(key, value, schema: named, for: operation) }
        }
        return query
    }

    /// Adds attribute `key` of the query's class (`schema`), normalized.
    ///
    /// - Throws: `KeychainStatus` `.param` for a key the class does not have, a value of the wrong type, or an
    ///   attribute `operation` cannot take.
    private mutating func addAttribute(
        _ key: String, _ value: KeychainValue, schema: [String: AttributeSchema.Kind], for operation: Operation
    ) throws {
        guard let kind = schema[key] else {
            throw KeychainStatus(.param, "\(key) is not an attribute of this class")
        }
        guard let normalized = AttributeSchema.normalize(value, as: kind) else {
            throw KeychainStatus(.param, "\(key) has a value of the wrong type")
        }
        if kind == .date && operation == .add {
            throw KeychainStatus(.param, "\(key) is read-only")
        }
        if kind == .access && operation != .add {
            throw KeychainStatus(.param, "kSecAttrAccess is set by SecItemAdd or SecItemUpdate, not matched")
        }
        if kind == .protection, let name = normalized.stringValue, ProtectionClass(rawValue: name) == nil {
            throw KeychainStatus(.param, "kSecAttrAccessible has an unknown value")
        }
        attributes[key] = normalized
    }

    /// Parses the second dictionary of `SecItemUpdate`: real attributes (and `kSecValueData`) only.
    package static func parseChanges(
        _ dictionary: [String: KeychainValue], for itemClass: ItemClass
    ) throws -> (attributes: [String: KeychainValue], data: SecureBytes?) {
        guard !dictionary.isEmpty else { throw KeychainStatus(.param, "nothing to update") }
        let schema = AttributeSchema.attributes(of: itemClass)
        var attributes: [String: KeychainValue] = [:]
        var data: SecureBytes?
        for (key, value) in dictionary {
            if key == ItemKey.valueData {
                guard let bytes = value.secretValue else { throw KeychainStatus(.param, "kSecValueData must be data") }
                data = bytes
                continue
            }
            guard let kind = schema[key], kind != .date else {
                throw KeychainStatus(.param, "\(key) cannot be updated on this class")
            }
            guard let normalized = AttributeSchema.normalize(value, as: kind) else {
                throw KeychainStatus(.param, "\(key) has a value of the wrong type")
            }
            if key == ItemKey.accessGroup, normalized.stringValue?.isEmpty != false {
                throw KeychainStatus(.param, "kSecAttrAccessGroup must be a non-empty string")
            }
            if kind == .protection, let name = normalized.stringValue, ProtectionClass(rawValue: name) == nil {
                throw KeychainStatus(.param, "kSecAttrAccessible has an unknown value")
            }
            attributes[key] = normalized
        }
        return (attributes, data)
    }
}

/// A persistent reference: a stable name for one row that survives restarts (`"lapr"`, version, class, row id).
package struct PersistentReference: Sendable, Hashable {
    package var itemClass: ItemClass
    package var rowID: Int64

    package init(itemClass: ItemClass, rowID: Int64) {
        self.itemClass = itemClass
        self.rowID = rowID
    }

    /// Parses the bytes `data` produces; nil when they are not a persistent reference.
    package init?(_ bytes: Data) {
        let b = [UInt8](bytes)
        guard b.count == 17, b[0..<4] == [0x6C, 0x61, 0x70, 0x72], b[4] == 1,
            let itemClass = ItemClass(rawValue: String(decoding: b[5..<9], as: UTF8.self)),
            itemClass != .identity
        else { return nil }
        var rowID: Int64 = 0
        for byte in b[9..<17] { rowID = rowID << 8 | Int64(byte) }
        self.itemClass = itemClass
        self.rowID = rowID
    }

    /// The 17 bytes handed to callers as `kSecValuePersistentRef`.
    package var data: Data {
        var bytes: [UInt8] = [0x6C, 0x61, 0x70, 0x72, 1] + itemClass.persistentTag
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: rowID >> shift)) }
        return Data(bytes)
    }
}
