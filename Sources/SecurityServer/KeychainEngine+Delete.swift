import Authenticators
import Enclave
import Foundation
import SecurityProtocol
import KeychainStore
import SecureCrypto

/// Deleting matched items (and an identity's key) in one write.
extension KeychainEngine {
    func delete(_ query: ItemQuery, caller: CallerIdentity) throws {
        var query = query
        query.limit = nil
        let events = try database.write { transaction in
            var events: [EngineEvent] = []
            var rows: [StoredItem] = []
            for item in try matchingItems(query, caller: caller, transaction: transaction) {
                rows.append(item.row)
                if query.itemClass == .identity,
                    let key = try identityKey(for: item, caller: caller, transaction: transaction)
                {
                    rows.append(key.row)
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
        hub.emit(events)
    }
}
