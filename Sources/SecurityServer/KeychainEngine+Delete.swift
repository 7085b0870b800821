import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// Deleting matched items (and an identity's key) in one write.
extension KeychainEngine {
    func delete(_ query: ItemQuery, caller: CallerIdentity) throws {
        var query = query
        query.limit = nil
        // A program an item's trusted-application list does not name is asked first, with no transaction open.
        let events = try withAuthorizations { decisions in
            try database.write { transaction in
                try delete(query, caller: caller, transaction: transaction, decisions: decisions)
            }
        }
        hub.emit(events)
    }

    private func delete(
        _ query: ItemQuery, caller: CallerIdentity, transaction: StoreTransaction, decisions: AuthorizationDecisions
    ) throws -> [EngineEvent] {
        var events: [EngineEvent] = []
        var rows: [StoredItem] = []
        for item in try matchingItems(query, caller: caller, transaction: transaction) {
            var items = [item]
            if query.itemClass == .identity,
                let key = try identityKey(for: item, caller: caller, transaction: transaction)
            {
                items.append(key)
            }
            for item in items {
                try Self.requireAllowed(decisions.trust(for: item, caller: caller, operation: .update, query: query))
                rows.append(item.row)
            }
        }
        guard !rows.isEmpty else { throw KeychainStatus(.itemNotFound, "no item matches") }
        var deleted = Set<Int64>()
        for row in rows where deleted.insert(row.rowID).inserted {
            try transaction.delete(rowID: row.rowID)
            events.append(event(.deleted, row))
        }
        return events
    }
}
