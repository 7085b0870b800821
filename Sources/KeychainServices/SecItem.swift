import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol

/// Adds an item to the keychain.
///
/// - Parameters:
///   - attributes: `kSecClass`, the item's attributes, `kSecValueData` (or `kSecValueRef` for a certificate or key),
///     and optionally `kSecReturn…` keys.
///   - result: receives what the `kSecReturn…` keys ask for; untouched when none is given.
/// - Returns: `errSecSuccess`; `errSecDuplicateItem` when an item with the same primary key exists;
///   `errSecParam` for malformed input (nothing is written); `errSecMissingEntitlement` for an access group the
///   caller does not hold; `errSecInteractionNotAllowed` when the item's protection class is locked.
@discardableResult
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    perform(result, context: attributes) { try .add(SecItemConversion.dictionary(attributes, allowingValueRef: true)) }
}

/// Finds items that match a query.
///
/// - Parameters:
///   - query: `kSecClass` (or `kSecValuePersistentRef`), attributes to match, `kSecMatchLimit`,
///     `kSecMatchCaseInsensitive` and `kSecReturn…` keys.
///   - result: receives the matches shaped as Apple does: one return key and one match gives `Data`, a dictionary
///     or a reference; several return keys give a dictionary per item; a match limit above one gives an array.
/// - Returns: `errSecSuccess`, `errSecItemNotFound`, `errSecParam`, `errSecInteractionNotAllowed` (locked, or the
///   item's access control needs an authentication), `errSecDecode` (a damaged or tampered row).
@discardableResult
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    perform(result, context: query) {
        try .copyMatching(SecItemConversion.dictionary(query, allowingValueRef: false))
    }
}

/// Changes every item that matches a query.
///
/// - Parameters:
///   - query: what to change, as for `SecItemCopyMatching` (no `kSecReturn…` keys).
///   - attributesToUpdate: real attributes and/or `kSecValueData` only.
/// - Returns: `errSecSuccess`, `errSecItemNotFound`, `errSecParam`, or `errSecDuplicateItem` when a change would make
///   two items clash (then nothing changes). The modification date of each changed item moves.
@discardableResult
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    perform(nil, context: query) {
        try .update(
            query: SecItemConversion.dictionary(query, allowingValueRef: false),
            attributes: SecItemConversion.dictionary(attributesToUpdate, allowingValueRef: false))
    }
}

/// Deletes every item that matches a query.
///
/// - Returns: `errSecSuccess`, `errSecItemNotFound` or `errSecParam`.
@discardableResult
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    perform(nil, context: query) { try .delete(SecItemConversion.dictionary(query, allowingValueRef: false)) }
}

/// Sends the request `makeRequest` builds, prompting as the `LAContext` in `dictionary` says (the client's
/// defaults without one), and shapes its results into `result`.
private func perform(
    _ result: UnsafeMutablePointer<CFTypeRef?>?, context dictionary: CFDictionary,
    _ makeRequest: () throws -> KeychainRequest
) -> OSStatus {
    SecItemFailureDetail.current = nil
    do {
        let request = try makeRequest()
        let context = SecItemConversion.contextHandle(in: dictionary)
        let response = try KeychainClientSelection.resolve().sendBlocking(request, context: context)
        if case .items(let items) = response, let result {
            result.pointee = SecKey.withLookupContext(of: request, handle: context) { SecItemConversion.shape(items) }
        }
        return errSecSuccess
    } catch let status as KeychainStatus {
        SecItemFailureDetail.current = status.message
        return status.code.rawValue
    } catch {
        return errSecInternalComponent
    }
}

/// What the engine said about the last SecItem call of this thread that failed, beyond its `OSStatus` (which file is
/// damaged, say): Apple's functions return the status alone, and a tool that prints errors for people (`lactl`)
/// reads this. Never item contents (``KeychainStatus``'s messages hold none).
package enum SecItemFailureDetail {
    private static let key = "la.secItemFailureDetail"

    /// The last failure's message on this thread; nil before any.
    package static var current: String? {
        get { Thread.current.threadDictionary[key] as? String }
        set { Thread.current.threadDictionary[key] = newValue }
    }
}

/// Converts between Foundation values and the engine's typed values.
enum SecItemConversion {
    /// The `LAContext` a dictionary passes as `kSecUseAuthenticationContext`, if any.
    static func contextHandle(in dictionary: NSDictionary) -> (any AuthenticationContextHandle)? {
        dictionary[kSecUseAuthenticationContext as String] as? any AuthenticationContextHandle
    }

    /// `dictionary` with every key a string and every value one of the types keychain attributes take.
    ///
    /// - Throws: `KeychainStatus(.param)` for any other key or value type.
    static func dictionary(_ dictionary: NSDictionary, allowingValueRef: Bool) throws -> [String: KeychainValue] {
        var result: [String: KeychainValue] = [:]
        var reference: Any?
        for (key, value) in dictionary {
            guard let key = key as? String else { throw KeychainStatus(.param, "a dictionary key is not a string") }
            if key == "v_Ref" {
                guard allowingValueRef else { throw KeychainStatus(.param, "kSecValueRef is only for SecItemAdd") }
                reference = value
                continue
            }
            result[key] = try keychainValue(value)
        }
        // The item's data travels as a secret: the engine's copy is zeroizing memory from the frame on.
        if case .data(let data)? = result["v_Data"] { result["v_Data"] = .secret(SecureBytes(data)) }
        if let reference {
            try addReference(reference, to: &result)
        }
        return result
    }

    /// `kSecValueRef` in an add: a certificate or key becomes its class and data.
    private static func addReference(_ reference: Any, to result: inout [String: KeychainValue]) throws {
        guard result["v_Data"] == nil else {
            throw KeychainStatus(.param, "kSecValueRef and kSecValueData are exclusive")
        }
        switch reference {
        case let certificate as SecCertificate:
            guard result["class"].map({ $0 == .string("cert") }) ?? true else {
                throw KeychainStatus(.param, "kSecValueRef is a certificate, kSecClass is not")
            }
            result["class"] = .string("cert")
            result["v_Data"] = .data(certificate.derData)
        case let key as SecKey:
            guard result["class"].map({ $0 == .string("keys") }) ?? true else {
                throw KeychainStatus(.param, "kSecValueRef is a key, kSecClass is not")
            }
            result["class"] = .string("keys")
            result["v_Data"] = .data(key.keyData.unprotectedData())
            for name in ["kcls", "type", "bsiz", "esiz", "klbl", "tkid"] where result[name] == nil {
                result[name] = key.keyAttributes[name]
            }
        default:
            throw KeychainStatus(.param, "kSecValueRef must be a certificate or a key")
        }
    }

    /// One value, by its dynamic type.
    static func keychainValue(_ value: Any) throws -> KeychainValue {
        if type(of: value) == Bool.self, let flag = value as? Bool { return .bool(flag) }
        switch value {
        case let string as String: return .string(string)
        case let data as Data: return .data(data)
        case let date as Date: return .date(date)
        case let access as SecAccessControl: return .accessControl(access.policy)
        case let access as SecAccess: return .access(access.access)
        case let context as any AuthenticationContextHandle:
            do {
                return .data(Data(try context.authenticationContextID().bytes))
            } catch {
                throw KeychainStatus(.authFailed, "the LAContext is not usable")
            }
        case let number as NSNumber:
            let integer = number.int64Value
            guard Double(integer) == number.doubleValue else {
                throw KeychainStatus(.param, "a number attribute is not an integer")
            }
            return .integer(integer)
        default:
            throw KeychainStatus(.param, "a value has a type keychain attributes do not take")
        }
    }

    /// A stored value as the Foundation value Apple returns.
    static func foundationValue(_ value: KeychainValue) -> Any {
        switch value {
        case .string(let string): string
        case .data(let data): data
        case .integer(let integer): Int(integer)
        case .bool(let flag): flag
        case .date(let date): date
        case .accessControl(let policy): SecAccessControl(policy: policy)
        case .access(let access): SecAccess(access)
        case .secret(let bytes): bytes.unprotectedData()
        }
    }

    /// Results shaped as `SecItemCopyMatching` returns them.
    static func shape(_ results: ItemResults) -> CFTypeRef? {
        if results.returns.isEmpty { return nil }
        let shaped = results.items.map { shape($0, returns: results.returns) }
        if results.isSingle { return shaped.first ?? nil }
        return shaped.compactMap { $0 } as NSArray
    }

    private static func shape(_ item: ItemResult, returns: ReturnOptions) -> CFTypeRef? {
        let single = [ReturnOptions.data, .attributes, .reference, .persistentReference].filter {
            returns.contains($0)
        }
        if single.count == 1 {
            switch single[0] {
            case .data: return item.data.map { $0.unprotectedData() as NSData }
            case .attributes: return item.attributes.map(dictionary)
            case .reference: return item.reference.map(reference)
            default: return item.persistentReference.map { $0 as NSData }
            }
        }
        var dictionary: [String: Any] = [:]
        for (key, value) in item.attributes ?? [:] { dictionary[key] = foundationValue(value) }
        if let data = item.data { dictionary["v_Data"] = data.unprotectedData() }
        if let reference = item.reference { dictionary["v_Ref"] = self.reference(reference) }
        if let persistent = item.persistentReference { dictionary["v_PersistentRef"] = persistent }
        return dictionary as NSDictionary
    }

    static func dictionary(_ attributes: [String: KeychainValue]) -> NSDictionary {
        var dictionary: [String: Any] = [:]
        for (key, value) in attributes { dictionary[key] = foundationValue(value) }
        return dictionary as NSDictionary
    }

    static func reference(_ reference: ItemReference) -> CFTypeRef {
        switch reference {
        case .certificate(let material):
            return SecCertificate(derData: material.data.unprotectedData())
        case .key(let material):
            return SecKey(material)
        case .identity(let certificate, let privateKey):
            return SecIdentity(
                certificate: SecCertificate(derData: certificate.data.unprotectedData()),
                privateKey: SecKey(privateKey))
        }
    }
}
