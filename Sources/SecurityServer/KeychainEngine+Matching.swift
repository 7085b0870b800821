import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// Which stored rows a query matches: blind-index lookups and attribute filters.
extension KeychainEngine {
    /// The items `query` matches among those `caller` may see, in row order, attributes decrypted.
    func matchingItems(
        _ query: ItemQuery, caller: CallerIdentity, transaction: StoreTransaction, includingValues: Bool = false,
        mayLeaveAttributesSealed: Bool = false
    ) throws -> [ItemSealer.OpenedItem] {
        let groups = try searchedGroups(query, caller: caller)
        let storedClass = query.itemClass == .identity ? ItemClass.certificate : query.itemClass
        var candidates: [StoredItem]
        var usedScan = false
        if let reference = query.persistentReference {
            guard storedClass == nil || storedClass == reference.itemClass,
                let row = try transaction.item(rowID: reference.rowID), row.itemClass == reference.itemClass.rawValue,
                groups?.contains(row.accessGroup) ?? true
            else { return [] }
            candidates = [row]
        } else if let storedClass, let groups, !query.caseInsensitive, query.itemClass != .identity,
            AttributeSchema.primaryKey(of: storedClass).allSatisfy({ query.attributes[$0] != nil })
        {
            let syncValues: [Bool] =
                switch query.synchronizable {
                case .no: [false]
                case .yes: [true]
                case .any: [false, true]
                }
            var indexes: [Data] = []
            for group in groups {
                for sync in syncValues {
                    indexes.append(
                        sealer.blindIndex(
                            itemClass: storedClass, accessGroup: group, synchronizable: sync,
                            attributes: query.attributes))
                }
            }
            candidates = try transaction.items(blindIndexes: indexes, includingValues: includingValues)
                .sorted { $0.rowID < $1.rowID }
        } else {
            let sync: Bool? =
                switch query.synchronizable {
                case .no: false
                case .yes: true
                case .any: nil
                }
            candidates = try transaction.items(
                itemClass: storedClass!.rawValue, accessGroups: groups, synchronizable: sync)
            usedScan = true
        }
        // A lookup by the full primary key that returns nothing but data or persistent references needs no
        // attribute: the blind index already matched every filter, and the clear (authenticated) access-control
        // flag says whether an access-control check is due.
        let primaryKey = storedClass.map { Set(AttributeSchema.primaryKey(of: $0)) } ?? []
        let attributesNeeded =
            !mayLeaveAttributesSealed || usedScan || query.caseInsensitive || query.itemClass == .identity
            || query.persistentReference != nil || !query.returns.isSubset(of: [.data, .persistentReference])
            || !query.attributes.keys.allSatisfy(primaryKey.contains)
        var matches: [ItemSealer.OpenedItem] = []
        for row in candidates {
            if !attributesNeeded && row.hasAccessControl == false {
                matches.append(try sealer.unopened(row))
                continue
            }
            // A persistent reference names one item whatever its kSecAttrSynchronizable, unless the query says.
            if query.persistentReference != nil && query.synchronizableWasGiven && query.synchronizable != .any
                && row.synchronizable != (query.synchronizable == .yes)
            {
                continue
            }
            let item = try sealer.open(row)
            if Self.matches(item.attributes, query.attributes, caseInsensitive: query.caseInsensitive) {
                matches.append(item)
            }
        }
        return matches
    }

    /// The access groups `query` searches: the one it names (which the caller must hold), else every group the
    /// caller sees (nil: all).
    ///
    /// - Throws: `errSecMissingEntitlement` for a named group the caller does not hold.
    func searchedGroups(_ query: ItemQuery, caller: CallerIdentity) throws -> [String]? {
        guard let group = query.accessGroup else { return caller.visibleGroups }
        guard caller.mayAccess(group) else {
            throw KeychainStatus(.missingEntitlement, "the caller does not hold access group \(group)")
        }
        return [group]
    }

    static func matches(
        _ attributes: [String: KeychainValue], _ filters: [String: KeychainValue], caseInsensitive: Bool
    ) -> Bool {
        for (key, wanted) in filters {
            guard let value = attributes[key] else { return false }
            if AttributeSchema.matches(value, wanted) { continue }
            if caseInsensitive, case .string(let a) = value, case .string(let b) = wanted,
                a.compare(b, options: [.caseInsensitive]) == .orderedSame
            {
                continue
            }
            return false
        }
        return true
    }
}
