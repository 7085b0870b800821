import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// Adding an item: Keychain Services' defaults and rules, sealed and inserted in one write.
extension KeychainEngine {
    func add(_ query: ItemQuery, caller: CallerIdentity) throws -> ItemResults? {
        let itemClass = query.itemClass!
        guard let group = query.accessGroup ?? caller.defaultAccessGroup else {
            throw KeychainStatus(.missingEntitlement, "the caller holds no keychain access group")
        }
        guard caller.mayAccess(group) else {
            throw KeychainStatus(.missingEntitlement, "the caller does not hold access group \(group)")
        }
        var attributes = query.attributes
        try Self.requireOneAccessKind(attributes)
        try nameTrustedApplications(in: &attributes, caller: caller)
        let protectionClass = try Self.protectionClass(of: attributes)
        // A synchronizable `…ThisDeviceOnly` item is stored, as Apple's securityd stores it (its add path refuses
        // synchronizable items only to app clips and in the system keychain: SecServerItemAddWithCustomDb,
        // keychain/securityd/SecItemServer.c); such an item never leaves the device, and this keychain syncs nothing.
        let synchronizable = query.synchronizable == .yes
        if protectionClass == .whenPasscodeSetThisDeviceOnly { try notePasscodeIfSet() }
        if itemClass == .key, case .accessControl(let policy) = attributes[ItemKey.accessControl],
            AccessRequirement.usesPrivateKey(policy),
            attributes["tkid"] != .string(Self.secureEnclaveToken)
        {
            // Apple: privateKeyUsage is "required for SE keys" and scopes the list to operations only the Secure
            // Enclave performs; a software key under it would be stored readable and usable without any check.
            throw KeychainStatus(.param, "kSecAccessControlPrivateKeyUsage needs kSecAttrTokenIDSecureEnclave")
        }
        let schema = AttributeSchema.attributes(of: itemClass)
        for key in AttributeSchema.primaryKey(of: itemClass) where attributes[key] == nil {
            attributes[key] = AttributeSchema.defaultValue(for: schema[key]!)
        }
        let now = Date()
        attributes[ItemKey.accessGroup] = .string(group)
        attributes[ItemKey.accessible] = .string(protectionClass.rawValue)
        attributes[ItemKey.synchronizable] = .bool(synchronizable)
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        var data = query.valueData ?? SecureBytes([UInt8]())
        if case .accessControl(var policy) = attributes[ItemKey.accessControl] {
            if AccessRequirement.bindsEnrolledSet(policy), let authentication {
                // Bound now: after any enrollment change the item can never be satisfied again.
                policy.boundStateHash = try authentication.currentStateHash() ?? Data()
                attributes[ItemKey.accessControl] = .accessControl(policy)
            }
            data = try sealForApplicationPassword(data, policy: policy, context: query.authenticationContext)
        }
        let blindIndex = sealer.blindIndex(
            itemClass: itemClass, accessGroup: group, synchronizable: synchronizable, attributes: attributes)
        let stored = try database.write { transaction in
            let row = StoredItem(
                rowID: try transaction.nextRowID(), itemClass: itemClass.rawValue, accessGroup: group,
                protectionClass: protectionClass.rawValue, synchronizable: synchronizable, blindIndex: blindIndex,
                attributes: Data(), wrappedKey: Data(), value: nil)
            let sealed = try sealer.seal(row, attributes: attributes, data: data, protectionClass: protectionClass)
            try transaction.insert(sealed)
            return sealed
        }
        hub.emit([event(.added, stored)])
        guard !query.returns.isEmpty else { return nil }
        let opened = ItemSealer.OpenedItem(
            row: stored, itemClass: itemClass, protectionClass: protectionClass, attributes: attributes)
        let result = try withAuthorizations { decisions in
            try database.read { transaction in
                try self.result(
                    for: opened, query: query, caller: caller, transaction: transaction, decisions: decisions)
            }
        }
        return ItemResults(returns: query.returns, isSingle: true, items: result.map { [$0] } ?? [])
    }
}
