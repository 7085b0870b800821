import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// Updating matched items: authorized first, then re-sealed in one write.
extension KeychainEngine {
    func update(_ query: ItemQuery, changes: [String: KeychainValue], caller: CallerIdentity) throws {
        let itemClass = query.itemClass ?? query.persistentReference!.itemClass
        guard itemClass != .identity else {
            throw KeychainStatus(.param, "update the identity's certificate or key item instead")
        }
        var (changedAttributes, newData) = try ItemQuery.parseChanges(changes, for: itemClass)
        try nameTrustedApplications(in: &changedAttributes, caller: caller)
        if case .string(let group) = changedAttributes[ItemKey.accessGroup], !caller.mayAccess(group) {
            throw KeychainStatus(.missingEntitlement, "the caller does not hold access group \(group)")
        }
        var query = query
        query.limit = nil
        // Every protected match is authorized first, from a read and with no transaction open (a prompt may take
        // as long as the user needs without holding SQLite's write lock); the write then finds each row as it was
        // authorized, or goes back for the authorization of the row that changed meanwhile.
        let events = try withAuthorizations { decisions in
            try database.read { transaction in
                for item in try matchingItems(query, caller: caller, transaction: transaction) {
                    try requireAvailable(item)
                    try Self.requireAllowed(
                        decisions.verdict(for: item, caller: caller, operation: .update, query: query))
                }
            }
            return try database.write { transaction in
                let matches = try matchingItems(query, caller: caller, transaction: transaction)
                guard !matches.isEmpty else { throw KeychainStatus(.itemNotFound, "no item matches") }
                var events: [EngineEvent] = []
                let now = Date()
                for item in matches {
                    try requireAvailable(item)
                    try Self.requireAllowed(
                        decisions.verdict(for: item, caller: caller, operation: .update, query: query))
                    var attributes = item.attributes.merging(changedAttributes) { _, new in new }
                    if changedAttributes[ItemKey.accessible] != nil && changedAttributes[ItemKey.accessControl] == nil
                        && item.accessControl != nil
                    {
                        throw KeychainStatus(.param, "change kSecAttrAccessControl to change the protection class")
                    }
                    if changedAttributes[ItemKey.accessControl] != nil { attributes[ItemKey.accessible] = nil }
                    try Self.requireOneAccessKind(attributes)
                    let protectionClass = try Self.protectionClass(of: attributes)
                    attributes[ItemKey.accessible] = .string(protectionClass.rawValue)
                    attributes["mdat"] = .date(max(now, Self.date(attributes["cdat"]) ?? now))
                    // Stored also with a `…ThisDeviceOnly` class, as Apple's securityd does (KeychainEngine+Add).
                    let synchronizable = attributes[ItemKey.synchronizable]?.boolValue ?? false
                    let group = attributes[ItemKey.accessGroup]?.stringValue ?? item.row.accessGroup
                    // The current value is opened (and its application-password layer with the context's password) even
                    // when a new value replaces it: Apple's update decrypts the item under its current list first, so a
                    // wrong password changes nothing (kAKSKeyOpDecrypt of the old ACL, SecAccessControl.m).
                    var data = try openData(item, transaction: transaction)
                    if let old = item.accessControl {
                        data = try openForApplicationPassword(data, policy: old, context: query.authenticationContext)
                    }
                    if let newData { data = newData }
                    if case .accessControl(var policy) = attributes[ItemKey.accessControl] {
                        if changedAttributes[ItemKey.accessControl] != nil, AccessRequirement.bindsEnrolledSet(policy),
                            let authentication
                        {
                            policy.boundStateHash = try authentication.currentStateHash() ?? Data()
                            attributes[ItemKey.accessControl] = .accessControl(policy)
                        }
                        data = try sealForApplicationPassword(
                            data, policy: policy, context: query.authenticationContext)
                    }
                    var row = item.row
                    row.accessGroup = group
                    row.protectionClass = protectionClass.rawValue
                    row.synchronizable = synchronizable
                    row.blindIndex = sealer.blindIndex(
                        itemClass: item.itemClass, accessGroup: group, synchronizable: synchronizable,
                        attributes: attributes)
                    let sealed = try sealer.seal(
                        row, attributes: attributes, data: data, protectionClass: protectionClass)
                    try transaction.update(sealed)
                    events.append(event(.updated, sealed))
                }
                return events
            }
        }
        hub.emit(events)
    }

    /// Throws unless an update's decision allows it (a skip is not possible for an update).
    static func requireAllowed(_ decision: AccessDecision) throws {
        switch decision {
        case .allowed: break
        case .denied(let code): throw KeychainStatus(code, "the item's access control is not satisfied")
        case .skip: throw KeychainStatus(.interactionNotAllowed, "the item's access control is not satisfied")
        }
    }
}
