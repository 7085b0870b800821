import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// Finding items and building their results; access control decided outside the read (see withAuthorizations).
extension KeychainEngine {
    /// - Parameter direct: whether the hot path (``directLookup(_:caller:)-(ItemQuery,_)``) is tried first; not
    ///   when the request's dictionary already took it to a row that needs this path.
    func copyMatching(_ query: ItemQuery, caller: CallerIdentity, direct: Bool = true) throws -> ItemResults {
        if direct, case .answered(let results) = try directLookup(query, caller: caller) { return results }
        // kSecReturnRef on a password is not an error on Apple platforms: the result simply carries no reference.
        // Access control is decided between reads, with no snapshot held while a prompt waits for the user.
        return try withAuthorizations { decisions in
            try database.read { transaction in
                var results: [ItemResult] = []
                let matches = try matchingItems(
                    query, caller: caller, transaction: transaction,
                    includingValues: query.returns.contains(.data) || query.returns.contains(.reference),
                    mayLeaveAttributesSealed: true)
                for item in matches {
                    if let limit = query.limit, results.count >= limit { break }
                    // Opening the data checks the class key itself (one keybag check per item, not two).
                    if !Self.needsData(query.returns, item.itemClass) { try requireAvailable(item) }
                    if let result = try result(
                        for: item, query: query, caller: caller, transaction: transaction, decisions: decisions)
                    {
                        results.append(result)
                    }
                }
                guard !results.isEmpty else { throw KeychainStatus(.itemNotFound, "no item matches") }
                return ItemResults(returns: query.returns, isSingle: query.limit == 1, items: results)
            }
        }
    }

    /// The hot path (`SecItemCopyMatching` of one item by its full primary key, returning its data or persistent
    /// reference) straight from the request's dictionary, before any `ItemQuery` is made: nil when the request needs
    /// the general path, which then parses it (and reports what is wrong with it). Only these keys are taken: the
    /// class, every primary-key attribute (values of their schema types), the access group, synchronizable as a
    /// boolean, `kSecReturnData` / `kSecReturnPersistentRef` and the match limit; any other key, a value of another
    /// type, a group the caller does not hold or a row with a list goes the general way.
    func directLookup(_ dictionary: [String: KeychainValue], caller: CallerIdentity) throws -> DirectOutcome {
        guard case .string(let name)? = dictionary[ItemKey.itemClass], let itemClass = ItemClass(rawValue: name),
            itemClass != .identity
        else { return .notTaken }
        let primaryKey = AttributeSchema.primaryKey(of: itemClass)
        // Where the primary key's values are in the dictionary, by position, found while it is walked once (not
        // hashed again for the blind index), inline: no class's primary key has more than seven attributes. Positions
        // in the dictionary, not the values: an array of these is made and dropped with no copy or release.
        var positions = InlineArray<7, Dictionary<String, KeychainValue>.Index?>(repeating: nil)
        precondition(primaryKey.count <= positions.count, "a primary key longer than the lookup keeps")
        let kinds = AttributeSchema.primaryKeyKinds(of: itemClass)
        // Not `[]`: an array literal of another module's option set builds it through the generic initializer.
        var returns = ReturnOptions(rawValue: 0)
        var limit: Int? = 1
        var accessGroup: String?
        var synchronizable = false
        var attributes = 0
        for entry in dictionary.indices {
            let (key, value) = dictionary[entry]
            switch key {
            case ItemKey.itemClass:
                continue
            case ItemKey.returnData, ItemKey.returnPersistentReference:
                guard let flag = value.boolValue else { return .notTaken }
                let option: ReturnOptions = key == ItemKey.returnData ? .data : .persistentReference
                if flag { returns.insert(option) } else { returns.remove(option) }
            case ItemKey.matchLimit:
                switch value {
                case .string(ItemKey.matchLimitOne): limit = 1
                case .string(ItemKey.matchLimitAll): limit = nil
                case .integer(let n) where n > 0: limit = Int(clamping: n)
                default: return .notTaken
                }
            case ItemKey.accessGroup:
                guard let group = value.stringValue, !group.isEmpty else { return .notTaken }
                accessGroup = group
            case ItemKey.synchronizable:
                // kSecAttrSynchronizableAny (both kinds) takes the general path.
                guard let flag = value.boolValue else { return .notTaken }
                synchronizable = flag
            default:
                guard let position = primaryKey.firstIndex(of: key),
                    AttributeSchema.normalize(value, as: kinds[position]) != nil
                else { return .notTaken }
                positions[position] = entry
                attributes += 1
            }
        }
        guard attributes == primaryKey.count else { return .notTaken }
        let group: String
        if let accessGroup {
            guard caller.mayAccess(accessGroup) else { return .notTaken }
            group = accessGroup
        } else {
            guard let groups = caller.visibleGroups, groups.count == 1 else { return .notTaken }
            group = groups[0]
        }
        return try directLookup(
            itemClass: itemClass, accessGroup: group, synchronizable: synchronizable,
            value: { position, _ in
                positions[position].flatMap { AttributeSchema.normalize(dictionary[$0].value, as: kinds[position]) }
            }, returns: returns, isSingle: limit == 1)
    }

    /// The hot path for a parsed query (one that came with keys the dictionary's path leaves to the general one,
    /// such as an operation prompt): nil when the query or the row needs the general path (any other filter or
    /// return type, several access groups or both synchronizable values, a row with a list).
    func directLookup(_ query: ItemQuery, caller: CallerIdentity) throws -> DirectOutcome {
        guard query.persistentReference == nil, !query.caseInsensitive, query.synchronizable != .any,
            query.returns.isSubset(of: Self.directReturns), query.limit.map({ $0 >= 1 }) ?? true,
            let itemClass = query.itemClass, itemClass != .identity
        else { return .notTaken }
        let primaryKey = AttributeSchema.primaryKey(of: itemClass)
        guard primaryKey.allSatisfy({ query.attributes[$0] != nil }),
            query.attributes.keys.allSatisfy(primaryKey.contains),
            let groups = try searchedGroups(query, caller: caller), groups.count == 1
        else { return .notTaken }
        return try directLookup(
            itemClass: itemClass, accessGroup: groups[0], synchronizable: query.synchronizable == .yes,
            value: { query.attributes[$1] }, returns: query.returns, isSingle: query.limit == 1)
    }

    /// One indexed statement outside any transaction object, the row read where SQLite holds it, its attributes
    /// left sealed, its data opened (which checks the class key, so a locked keychain still refuses); the row is left
    /// to the general path when it has an access-control or trusted-application list (whose decision needs the
    /// attributes).
    private func directLookup(
        itemClass: ItemClass, accessGroup: String, synchronizable: Bool, value: (Int, String) -> KeychainValue?,
        returns: ReturnOptions, isSingle: Bool
    ) throws -> DirectOutcome {
        let needsData = Self.needsData(returns, itemClass)
        var result: ItemResult?
        let found = try withUnsafeTemporaryAllocation(byteCount: HMACSHA256.byteCount, alignment: 1) { index in
            sealer.blindIndex(
                itemClass: itemClass, accessGroup: accessGroup, synchronizable: synchronizable, value: value,
                into: index)
            return try database.withItem(blindIndex: RawSpan(_unsafeBytes: index), includingValue: needsData) { row in
                guard row.hasAccessControl == false else { return }
                // The blind index names the class, so the row's is the one asked for (its data's associated data
                // binds the column as it is).
                guard itemClass.rawValue.utf8Equals(row.itemClass),
                    let protectionClass = ProtectionClass(utf8: row.protectionClass)
                else { throw KeychainStatus(.decode, "a row names an unknown class") }
                var item = ItemResult(itemClass: itemClass)
                if returns.contains(.persistentReference) {
                    item.persistentReference = PersistentReference(itemClass: itemClass, rowID: row.rowID).data
                }
                if needsData {
                    item.data = try sealer.openData(row, protectionClass: protectionClass)
                } else {
                    try requireAvailable(protectionClass)
                }
                result = item
            }
        }
        guard found else { throw KeychainStatus(.itemNotFound, "no item matches") }
        // A row with a list: the general path decides it.
        guard let result else { return .rowNeedsGeneralPath }
        return .answered(ItemResults(returns: returns, isSingle: isSingle, items: [result]))
    }

    /// What the hot path made of a lookup.
    enum DirectOutcome: Equatable {
        /// The lookup's results.
        case answered(ItemResults)
        /// The request is not one the hot path takes.
        case notTaken
        /// The row was found, and its list needs the general path's decision (no need to look it up directly again).
        case rowNeedsGeneralPath
    }

    /// What a lookup on the direct path may return.
    private static let directReturns: ReturnOptions = [.data, .persistentReference]

    /// The result for one matched item, or nil when its access control says to skip it.
    func result(
        for item: ItemSealer.OpenedItem, query: ItemQuery, caller: CallerIdentity, transaction: StoreTransaction,
        decisions: AuthorizationDecisions
    ) throws -> ItemResult? {
        var result = ItemResult(itemClass: query.itemClass ?? item.itemClass)
        let needsData = Self.needsData(query.returns, item.itemClass)
        if needsData {
            guard try Self.proceeds(decisions.verdict(for: item, caller: caller, operation: .readData, query: query))
            else { return nil }
        }
        var attributes: [String: KeychainValue] = [:]
        if query.returns.contains(.attributes) || query.returns.contains(.reference) {
            attributes = item.attributes
            attributes[ItemKey.itemClass] = .string(item.itemClass.rawValue)
        }
        if query.returns.contains(.attributes) {
            // Apple returns the persistent reference among the attributes too (kSecAttrPersistentReference).
            result.attributes = attributes.merging([
                "persistref": .data(PersistentReference(itemClass: item.itemClass, rowID: item.row.rowID).data)
            ]) { old, _ in old }
        }
        if query.returns.contains(.persistentReference) {
            result.persistentReference = PersistentReference(itemClass: item.itemClass, rowID: item.row.rowID).data
        }
        if needsData {
            var data = try openData(item, transaction: transaction)
            if let policy = item.accessControl {
                data = try openForApplicationPassword(data, policy: policy, context: query.authenticationContext)
            }
            if query.returns.contains(.data) { result.data = data }
            if query.returns.contains(.reference) && Self.hasReferences(item.itemClass) {
                result.reference =
                    item.itemClass == .certificate
                    ? .certificate(ItemMaterial(attributes: attributes, data: data))
                    : .key(
                        ItemMaterial(
                            attributes: attributes, data: data,
                            enclavePublicKey: Self.enclavePublicKey(attributes, data)))
            }
        }
        if query.itemClass == .identity {
            guard let key = try identityKey(for: item, caller: caller, transaction: transaction) else { return nil }
            if query.returns.contains(.attributes) {
                result.attributes = key.attributes.merging(attributes) { _, certificate in certificate }
                result.attributes?[ItemKey.itemClass] = .string(ItemClass.identity.rawValue)
            }
            if query.returns.contains(.reference), case .certificate(let certificate) = result.reference {
                try requireAvailable(key)
                guard try Self.proceeds(decisions.verdict(for: key, caller: caller, operation: .readData, query: query))
                else { return nil }
                let keyData = try openData(key, transaction: transaction)
                var keyAttributes = key.attributes
                keyAttributes[ItemKey.itemClass] = .string(ItemClass.key.rawValue)
                result.reference = .identity(
                    certificate: certificate,
                    privateKey: ItemMaterial(
                        attributes: keyAttributes, data: keyData,
                        enclavePublicKey: Self.enclavePublicKey(keyAttributes, keyData)))
            }
        }
        return result
    }

    /// Whether a read goes on past an item after `decision`: true when allowed, false when the item is skipped.
    ///
    /// - Throws: `KeychainStatus` with the denial's code.
    static func proceeds(_ decision: AccessDecision) throws -> Bool {
        switch decision {
        case .allowed: true
        case .skip: false
        case .denied(let code): throw KeychainStatus(code, "the item's access control is not satisfied")
        }
    }

    func openData(_ item: ItemSealer.OpenedItem, transaction: StoreTransaction) throws -> SecureBytes {
        guard let sealedValue = try item.row.value ?? transaction.value(rowID: item.row.rowID) else {
            throw KeychainStatus(.itemNotFound, "the item was deleted")
        }
        return try sealer.openData(item, sealedValue: sealedValue)
    }

    /// The private key (in a group the caller sees) whose application label is the certificate's public-key hash.
    func identityKey(
        for certificate: ItemSealer.OpenedItem, caller: CallerIdentity, transaction: StoreTransaction
    ) throws -> ItemSealer.OpenedItem? {
        guard case .data(let hash) = certificate.attributes["pkhh"], !hash.isEmpty else { return nil }
        for row in try transaction.items(
            itemClass: ItemClass.key.rawValue, accessGroups: caller.visibleGroups, synchronizable: nil)
        {
            let key = try sealer.open(row)
            if key.attributes["kcls"] == .string("1"), key.attributes["klbl"] == .data(hash) { return key }
        }
        return nil
    }

    /// The public key of an enclave key item (token `com.apple.setoken`), read from its handle here in the engine.
    static func enclavePublicKey(_ attributes: [String: KeychainValue], _ data: SecureBytes) -> Data? {
        guard attributes["tkid"] == .string(secureEnclaveToken) else { return nil }
        return try? EnclaveKey(serialized: data.unprotectedData()).publicKey
    }
}
